"""Writing what a run found about flakes beside its card: `freeze-proposal.json` (a freeze file
fragment whose entries wait for an owner) and `repair-task.md`. The contents are rendered by
`gate.core.report.proposals` from the card alone; a file this run has nothing for is removed, so a stale
proposal from an earlier run never sits beside a card that does not name it.
"""

from __future__ import annotations

from pathlib import Path

from gate.core.card.card import VerdictCard
from gate.core.errors import UsageError
from gate.core.policy.freezes import FreezeFile
from gate.core.report.proposals import (
    FREEZE_PROPOSAL,
    LIFT_PROPOSAL,
    REPAIR_TASK,
    freeze_proposal,
    proposal_json,
    render_repair_task,
)
from gate.io.artifacts import check_writable, write_output
from gate.io.inputs import reason
from gate.io.snapshot import check_outside_tree
from gate.io.treeselect import TreeSelection


def proposal_paths(card: Path) -> tuple[Path, Path]:
    """Where the freeze proposal and the repair task of the card at `card` go."""
    return card.parent / FREEZE_PROPOSAL, card.parent / REPAIR_TASK


def check_proposal_paths(card: Path, workdir: Path, selection: TreeSelection) -> None:
    """Refuse, before any trial, flake files the run could not write or remove at the end, or that would
    land in the patched tree without being left out of it (like the card)."""
    for path in proposal_paths(card):
        check_outside_tree(path, workdir, selection, field="--card")
        check_writable(path, "--card")


def write_proposals(card_path: Path, card: VerdictCard) -> None:
    """Write (or remove) the freeze proposal and the repair task beside the card, as the card names them."""
    proposal_file, task_file = proposal_paths(card_path)
    proposal = freeze_proposal(card)
    task = render_repair_task(card)
    if proposal is not None:
        write_output(proposal_file, proposal_json(proposal), "freeze proposal")
    else:
        _remove(proposal_file)
    if task is not None:
        write_output(task_file, task.encode("utf-8"), "repair task")
    else:
        _remove(task_file)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot remove a stale file from an earlier run: {reason(exc)}", file=str(path)) from None


def write_nightly_files(card_path: Path, proposal: FreezeFile | None, task: str | None, lift_note: str | None) -> None:
    """Write (or remove) the nightly pair's freeze proposal, repair task and lift proposal beside the card."""
    proposal_file, task_file = proposal_paths(card_path)
    lift_file = card_path.parent / LIFT_PROPOSAL
    files = (
        (proposal_file, proposal_json(proposal) if proposal is not None else None, "freeze proposal"),
        (task_file, task.encode("utf-8") if task is not None else None, "repair task"),
        (lift_file, lift_note.encode("utf-8") if lift_note is not None else None, "lift proposal"),
    )
    for path, data, what in files:
        if data is not None:
            write_output(path, data, what)
        else:
            _remove(path)
