"""Freeze proposals and repair tasks, never silent freezes: what a run writes beside its card when a
row's flicker was established on the base (`gate.core.policy.flakes`).

A contract flake yields a freeze entry ready to merge into the freeze file — with its owner left
empty, so that committed as is it freezes nothing (`gate.core.policy.freezes.resolve` skips an ownerless
entry): a person must take it. A safety flake is never proposed: it is a broken property, to be
fixed. Both get a Markdown repair task naming the property, run, seal, base commit, the trial
indices on each side and what the checks said; the messages quote probe output, so every text
from the card goes through the Markdown summary's escaping (`md_inline`).

Pure: card and verdicts in, values and text out; the runner writes the files (`gate.io.proposals`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from gate.core.card.card import PropertyRow, VerdictCard
from gate.core.policy.explain import Explanation
from gate.core.policy.flakes import BaseRerun, FlakeFiles, RerunVerdict
from gate.core.policy.freezes import FreezeEntry, FreezeFile
from gate.core.policy.history import LiftProposal, PairFlake
from gate.core.report.causes import cause_lines, cause_of, measured, shared_lines, together_lines
from gate.core.report.markdown import md_code, md_inline
from gate.core.verdicts.verdict import Band, ColourChange, Verdict

FREEZE_PROPOSAL = "freeze-proposal.json"
REPAIR_TASK = "repair-task.md"
LIFT_PROPOSAL = "lift-proposal.md"
# Long enough to repair a property and lift the freeze in review, short enough that a forgotten
# freeze lapses by itself rather than quarantining a property for good.
FREEZE_DAYS = 14
# An identifier made only of these is shown as code (copyable as is); a code span cannot hold a backtick,
# so nothing of this alphabet can end it. Anything else goes through `md_inline`.


def freeze_id(property_id: str, seal: str) -> str:
    """The proposed freeze's id: the property and the seal it flickered under (one entry per pair)."""
    return f"flake-{property_id}-{seal[:12]}"


def flake_files(verdicts: Sequence[Verdict], reruns: Mapping[str, BaseRerun], seal: str) -> FlakeFiles | None:
    """What the run will write beside its card, or None when no flake was established on the base."""
    flakes = [v for v in verdicts if (r := reruns.get(v.property_id)) and r.verdict is RerunVerdict.FLAKE]
    if not flakes:
        return None
    contract = tuple(freeze_id(v.property_id, seal) for v in flakes if v.band is Band.CONTRACT)
    return FlakeFiles(
        freeze_proposal=FREEZE_PROPOSAL if contract else None,
        repair_task=REPAIR_TASK,
        freeze_ids=contract,
        broken_safety=tuple(v.property_id for v in flakes if v.band is Band.SAFETY),
    )


def _flakes(card: VerdictCard) -> list[tuple[PropertyRow, BaseRerun]]:
    return [
        (row, row.base_rerun)
        for row in card.properties
        if row.base_rerun is not None and row.base_rerun.verdict is RerunVerdict.FLAKE
    ]


def _sides(change: ColourChange | None) -> str:
    return change.line().removeprefix("changed colour on identical bytes: ") if change else "no flicker"


def freeze_proposal(card: VerdictCard) -> FreezeFile | None:
    """The freeze entries for the card's contract flakes (a freeze file fragment), or None: owner
    empty, expiring `FREEZE_DAYS` after the run, `retry_allowed` false."""
    entries = [
        _proposed(
            row.id,
            card.fixture.seal,
            f"{row.id} changed colour on identical sealed bytes in run {card.run_id} ({_sides(row.colour_change)})"
            f" and in that run's rerun on base {rerun.base_commit} ({_sides(rerun.colour_change)})",
            card.created_at,
        )
        for row, rerun in _flakes(card)
        if row.band is Band.CONTRACT
    ]
    return FreezeFile(freezes=tuple(entries)) if entries else None


def proposal_json(proposal: FreezeFile) -> bytes:
    """The proposal as the freeze file's own JSON form, every field shown (the empty owner too)."""
    return (json.dumps(proposal.model_dump(mode="json"), indent=2) + "\n").encode()


def _indices(change: ColourChange | None, trials: int, hits: int) -> str:
    if change is not None:
        return md_inline(_sides(change))
    return f"{hits} of {trials} trials hit, none changed colour"


def _section(card: VerdictCard, row: PropertyRow, rerun: BaseRerun) -> list[str]:
    pid = md_code(row.id)
    if row.band is Band.SAFETY:
        head = f"## Safety property {pid} is broken: fix it, it is never frozen"
    else:
        proposed = md_code(freeze_id(row.id, card.fixture.seal))
        head = f"## Contract property {pid} is a flake: freeze {proposed} proposed"
    lines = [
        head,
        "",
        f"- Property: {pid} ({md_inline(str(row.band))}, fixture {md_inline(row.fixture)})",
        f"- Run: {md_code(card.run_id)}, and its rerun on the base within the same run",
        f"- Seal: {md_code(card.fixture.seal)}",
        f"- Base commit: {md_code(rerun.base_commit)}",
        f"- Image: {md_code(card.image_id or '-')}",
        f"- Patched tree {md_code(card.tree_digest[:16])}: {_indices(row.colour_change, row.trials, row.hits)}",
        f"- Base tree {md_code(rerun.tree_digest[:16])}: {_indices(rerun.colour_change, rerun.trials, rerun.hits)}",
        "",
        "What the checks said on the patched tree:",
        "",
        *_quoted(rerun.patched_messages),
        "",
        "What the checks said on the base tree:",
        "",
        *_quoted(rerun.base_messages),
        "",
    ]
    if row.band is Band.SAFETY:
        lines += [
            "The safety property changes colour on the base's own code under the same seal, image and clock.",
            "Safety properties are never frozen (a freeze file naming one is refused): repair the check, the",
            "fixture or the base's code until its trials agree, then judge the patch again.",
        ]
    else:
        lines += [
            f"`{FREEZE_PROPOSAL}` beside the card holds the proposed entry, expiring {FREEZE_DAYS} days after the run.",
            "Its `owner` is empty, and an entry without an owner freezes nothing: whoever takes this task writes",
            "their name there. Then merge the entry into the suite's freeze file and commit it to the base branch",
            "by its own commit (the freeze file is an oracle file: a patch that edits it is refused), and judge the",
            "patch again. The frozen property keeps running; repair it before the freeze expires.",
        ]
    return [*lines, ""]


def _quoted(messages: Sequence[str]) -> list[str]:
    return [f"- {md_inline(text)}" for text in messages] or ["- (no message)"]


def render_repair_task(card: VerdictCard) -> str | None:
    """The repair task (Markdown) for the card's flakes, or None when there are none."""
    found = _flakes(card)
    if not found:
        return None
    lines = [
        f"# Repair task: {len(found)} propert{'y changes' if len(found) == 1 else 'ies change'} colour on the base",
        "",
        f"Suite {md_inline(card.suite)}, run {md_code(card.run_id)}, probegate {md_inline(card.gate_version)}.",
        "Each property below changed colour on identical sealed bytes on the patched tree, and again when",
        "the same trials ran on the base tree: the flicker is not the patch's. This run still counted the",
        "patched tree's row as it came out: a flake is reported, never excused in the run that finds it.",
        "",
    ]
    for row, rerun in found:
        lines += _section(card, row, rerun)
    return "\n".join(lines).rstrip("\n") + "\n"


def pair_freeze_proposal(
    flakes: Sequence[PairFlake],
    bands: Mapping[str, Band],
    *,
    created_at: datetime,
    causes: Sequence[Explanation] = (),
) -> FreezeFile | None:
    """The freeze entries for contract properties whose colour differed between the nightly pair's two
    runs (safety is never proposed), each naming both run ids and its measured cause; owner empty,
    `FREEZE_DAYS` to expiry."""
    by_id = {e.property_id: e for e in causes}
    entries = [
        _proposed(
            flake.property_id,
            flake.second.seal,
            f"{flake.property_id} changed colour between two baseline runs of the same base commit"
            f" {flake.second.commit or '(no commit)'}, seal and image: {flake.first.kind} in run"
            f" {flake.first.run_id}, {flake.second.kind} in run {flake.second.run_id}"
            + (f"; {cause_of(by_id[flake.property_id])}" if flake.property_id in by_id else ""),
            created_at,
            cause=measured(by_id.get(flake.property_id)),
        )
        for flake in flakes
        if bands.get(flake.property_id) is Band.CONTRACT
    ]
    return FreezeFile(freezes=tuple(entries)) if entries else None


def render_pair_repair_task(
    flakes: Sequence[PairFlake], bands: Mapping[str, Band], suite: str, *, causes: Sequence[Explanation] = ()
) -> str | None:
    """The repair task (Markdown) for the nightly pair's flakes, naming both run ids, the seal and each
    flake's measured cause (flakes that share one listed once, under "Shared causes")."""
    if not flakes:
        return None
    by_id = {e.property_id: e for e in causes}
    first, second = flakes[0].first, flakes[0].second
    lines = [
        f"# Repair task: {len(flakes)} propert{'y changes' if len(flakes) == 1 else 'ies change'} colour"
        " between two baseline runs",
        "",
        f"Suite {md_inline(suite)}: runs {md_code(first.run_id)} and {md_code(second.run_id)} ran the baseline twice",
        f"in a row on base commit {md_code(second.commit or '-')}, seal {md_code(second.seal)},"
        f" image {md_code(second.image_id or '-')}.",
        "Nothing changed between them, so each property below changes colour without a code change.",
        "",
        *shared_lines(causes),
        *together_lines(flakes, causes),
    ]
    for flake in flakes:
        pid = md_code(flake.property_id)
        band = bands.get(flake.property_id)
        if band is Band.SAFETY:
            head = f"## Safety property {pid} is broken: fix it, it is never frozen"
        else:
            head = f"## {md_inline(str(band).capitalize())} property {pid} is a flake: freeze"
            head += f" {md_code(freeze_id(flake.property_id, flake.second.seal))} proposed"
        lines += [
            head,
            "",
            f"- Run {md_code(flake.first.run_id)}: {md_inline(str(flake.first.kind))}"
            f" ({flake.first.hits} of {flake.first.trials} trials hit)",
            f"- Run {md_code(flake.second.run_id)}: {md_inline(str(flake.second.kind))}"
            f" ({flake.second.hits} of {flake.second.trials} trials hit)",
            f"- Seal: {md_code(flake.second.seal)}",
            *cause_lines(by_id.get(flake.property_id), causes),
            "",
        ]
        if band is Band.SAFETY:
            lines += ["Safety properties are never frozen: repair the check, the fixture or the base's code.", ""]
        else:
            lines += [
                f"`{FREEZE_PROPOSAL}` beside the card holds the proposed entry, owner empty: whoever takes this",
                "task writes their name there and commits the entry to the base branch by its own commit.",
                "",
            ]
    return "\n".join(lines).rstrip("\n") + "\n"


def render_lift_note(lifts: Sequence[LiftProposal]) -> str | None:
    """The lift proposal (Markdown): freezes whose property passed enough recorded runs in a row."""
    if not lifts:
        return None
    lines = ["# Lift proposal: frozen properties that pass again", ""]
    for lift in lifts:
        lines += [
            f"- {md_inline(lift.line())}; streak from run {md_code(lift.run_ids[0])} to run {md_code(lift.run_ids[1])}."
            " Remove the entry from the freeze file by its own commit to the base branch.",
        ]
    return "\n".join(lines) + "\n"


def _proposed(property_id: str, seal: str, reason: str, created_at: datetime, *, cause: str = "") -> FreezeEntry:
    """A proposed freeze of one property: no owner until a person takes it, `FREEZE_DAYS` to expiry, created
    at the run that found the flake (the lift streak counts only runs after it)."""
    return FreezeEntry(
        freeze_id=freeze_id(property_id, seal),
        properties=(property_id,),
        seal=seal,
        reason=reason,
        created_at=created_at,
        expires_at=created_at + timedelta(days=FREEZE_DAYS),
        owner="",
        cause=cause,
    )
