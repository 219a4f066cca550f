"""What an ordinary `gate run` adds to the flake history: one entry per frozen property, written in the
same transaction as the ledger, so the lift rule (`gate.core.policy.history.lift_due`) counts passing runs
across ordinary runs and not only across nightly pairs.

Whose runs count. A frozen property's streak says how the *base* behaves; a patched tree is the
patch's data, never the judge. Counted, a patch's run could poison the history both ways: a patch
that pins the property's output (or just changes the code around it) would pass it run after run and
lift a freeze the base still needs; a patch that fails it on purpose — excused, since the property is
frozen — would end every streak and keep a quarantine forever; and many patch runs would push the
base's entries out of the bounded history. So only runs on the base's own bytes are recorded: a full
run (a partial `-k` run writes no books) with `--base`, whose snapshot digest equals the digest of the
base commit's tree laid out the same way (the base's probe entry laid over both). The base tree is
read from git's objects by the gate, not from the work tree; a tree equal to it byte for byte *is*
the base, whoever asked for the run. That is what CI's push job on the default branch runs
(`gate run --base HEAD`); a pull request's run is not recorded, and its card says why. The nightly
pair (`gate baseline --twice`, `gate.run.nightly`) is recorded by its own rule: it runs on the
default branch's checkout by the operator's schedule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gate.core.card.stamp import RunFacts
from gate.core.errors import GateError
from gate.core.policy.history import History, HistoryEntry, base_run_refusal, record, run_entries
from gate.core.verdicts.verdict import Verdict
from gate.io.gitbase import base_tree
from gate.io.snapshot import LocalInputs
from gate.io.treeselect import TreeSelection
from gate.run.oracle import Oracle


@dataclass(frozen=True)
class RunHistory:
    entries: dict[str, HistoryEntry]  # property id -> what to record (empty: nothing)
    note: str  # for the card: what was recorded, or why nothing was ("" without a frozen property)

    def update(self, history: History) -> History:
        """`history` with this run's entries (the books' history update: pure, may run twice)."""
        return record(history, self.entries)


def run_history(
    facts: RunFacts,
    verdicts: Sequence[Verdict],
    *,
    oracle: Oracle,
    selection: TreeSelection,
    fixtures: Mapping[str, bytes],
    partial: bool,
) -> RunHistory:
    """The history entries an ordinary run may add for its frozen properties, and a note saying why."""
    frozen = sorted(facts.trust.freezes.frozen)
    if not frozen:
        return RunHistory({}, "")
    base_digest = None
    if not partial and oracle.base_workdir is not None and facts.binding.base is not None:
        base_digest = _base_digest(oracle, facts, selection, fixtures)
    why = base_run_refusal(
        partial=partial, base_commit=facts.binding.base, tree_digest=facts.binding.tree_digest, base_digest=base_digest
    )
    if why:
        return RunHistory({}, f"frozen properties not recorded in the flake history: {why}")
    entries = run_entries(
        verdicts,
        frozen,
        run_id=facts.run_id,
        at=facts.started,
        seal=facts.binding.seal.digest,
        commit=facts.binding.base or "",
        image_id=facts.venue.image_id,
    )
    shown = ", ".join(f"{pid} {entries[pid].kind}" for pid in sorted(entries))
    return RunHistory(entries, f"recorded in the flake history (a run on the base's own tree): {shown}")


def _base_digest(
    oracle: Oracle, facts: RunFacts, selection: TreeSelection, fixtures: Mapping[str, bytes]
) -> str | None:
    """The digest the base commit's tree gets when laid out as the run's snapshot was, or None."""
    assert oracle.base_workdir is not None
    limits = facts.binding.suite.config.limits
    try:
        tree = base_tree(oracle.base_workdir, selection)
        with LocalInputs(oracle.base_workdir, fixtures, tree=tree, overrides=oracle.overrides, limits=limits) as inputs:
            return inputs.tree_digest
    except GateError:
        return None  # a base that cannot be laid out proves nothing: the run is not recorded
