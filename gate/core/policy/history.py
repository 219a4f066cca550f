"""Flake history: what each recorded run showed per property, kept in the books beside the ledger.

Two kinds of run record it. The nightly pair (`gate baseline --twice`) gives every property one
`HistoryEntry` — run id, time, seal, base commit, image, kind, trials and hits. An ordinary full
`gate run` gives one to each property it holds frozen, but only when it ran on the base's own bytes
(`base_run_refusal`: with `--base`, and a tree digest equal to the base commit's): a patched tree is
the patch's data, so it may neither start nor end a lift streak, nor push the base's entries out.
Only the last `HISTORY_LIMIT` per property are kept, so the books stay small. From the history come two
decisions: two runs of the same commit, seal and image whose kinds differ name a flake with both
run ids (`pair_flakes`), and a frozen property that has passed enough consecutive runs under its
seal since the freeze is proposed for lifting (`lift_due`): with zero failures in n runs the 95%
upper bound on the failure rate is about 3/n, so n ≥ ceil(3 / target) bounds it below `target`.

Pure: values in, values out; nothing here reads a clock or a store.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from gate.core.verdicts.verdict import Kind, Verdict

# Entries kept per property: room for the 60 passes in a row the default target needs, and more.
HISTORY_LIMIT = 100
LIFT_TARGET = 0.05  # failure rate a lifted freeze must be bounded below (95% upper bound)


class HistoryEntry(BaseModel):
    """One property's result in one recorded run."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    run_id: str = Field(min_length=1)
    at: AwareDatetime
    seal: str = Field(pattern=r"^[0-9a-f]{64}$")
    commit: str = ""  # the base commit the run was on ("" when the tree had none)
    image_id: str = ""
    kind: Kind
    trials: int = Field(ge=0)
    hits: int = Field(ge=0)


class History(BaseModel):
    """Entries by property id, oldest first, at most `HISTORY_LIMIT` each."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    runs: dict[str, tuple[HistoryEntry, ...]] = {}

    def of(self, property_id: str) -> tuple[HistoryEntry, ...]:
        return self.runs.get(property_id, ())


def record(history: History, entries: Mapping[str, HistoryEntry], limit: int = HISTORY_LIMIT) -> History:
    """`history` with each property's new entry added in time order (a run id already recorded for that
    property is replaced, so a retried transaction records once) and only the last `limit` kept."""
    runs = dict(history.runs)
    for pid, entry in entries.items():
        kept = sorted([*(e for e in runs.get(pid, ()) if e.run_id != entry.run_id), entry], key=lambda e: e.at)
        runs[pid] = tuple(kept[-limit:]) if limit > 0 else ()
    return history.model_copy(update={"runs": runs})


def bounded(history: History, limit: int = HISTORY_LIMIT) -> History:
    """`history` with only the last `limit` entries per property (books written with a larger limit)."""
    return history.model_copy(update={"runs": {pid: runs[-limit:] for pid, runs in history.runs.items() if runs}})


def base_run_refusal(*, partial: bool, base_commit: str | None, tree_digest: str, base_digest: str | None) -> str:
    """Why an ordinary run may not add to the flake history ("" when it may). Only a full run whose
    snapshot is the base commit's own tree counts: a patch that passes (or fails) a frozen property says
    nothing of the base, and counted it could lift a freeze the base still needs, or keep one forever."""
    if partial:
        return "a partial run (-k/--property) writes no books"
    if base_commit is None:
        return "no --base: the tree cannot be shown to be the base's"
    if base_digest is None:
        return f"the tree of base {base_commit[:12]} could not be laid out"
    if base_digest != tree_digest:
        return f"the tree differs from base {base_commit[:12]}'s (only runs on the base's own tree count)"
    return ""


def run_entries(
    verdicts: Iterable[Verdict],
    properties: Iterable[str],
    *,
    run_id: str,
    at: datetime,
    seal: str,
    commit: str,
    image_id: str,
) -> dict[str, HistoryEntry]:
    """One entry for each of `properties` that the run judged (an ordinary run records its frozen ones)."""
    wanted = set(properties)
    return {
        v.property_id: HistoryEntry(
            run_id=run_id, at=at, seal=seal, commit=commit, image_id=image_id, kind=v.kind, trials=v.trials, hits=v.hits
        )
        for v in verdicts
        if v.property_id in wanted
    }


class PairFlake(BaseModel):
    """A property whose kind differed between two runs on the same commit, seal and image."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    property_id: str
    first: HistoryEntry
    second: HistoryEntry

    def line(self) -> str:
        return (
            f"{self.property_id}: {self.first.kind} in run {self.first.run_id},"
            f" {self.second.kind} in run {self.second.run_id} (same commit, seal and image)"
        )


def pair_flakes(first: Mapping[str, HistoryEntry], second: Mapping[str, HistoryEntry]) -> tuple[PairFlake, ...]:
    """The properties whose colour (kind) differs between two runs of the same commit, seal and image.
    A property missing from either run, a pair that differs in what it ran on, or a harness error on
    either side (the harness broke, not the property) proves nothing."""
    found = []
    for pid in sorted(set(first) & set(second)):
        a, b = first[pid], second[pid]
        same_bytes = (a.commit, a.seal, a.image_id) == (b.commit, b.seal, b.image_id)
        harness = Kind.HARNESS_ERROR in (a.kind, b.kind)
        if same_bytes and not harness and a.run_id != b.run_id and a.kind is not b.kind:
            found.append(PairFlake(property_id=pid, first=a, second=b))
    return tuple(found)


def runs_needed(target: float = LIFT_TARGET) -> int:
    """Consecutive passes that bound the failure rate below `target` at 95%: ceil(3 / target). A target
    outside (0, 1), or one needing more runs than the history keeps (below 3 / HISTORY_LIMIT), is refused."""
    if not 3 / HISTORY_LIMIT <= target < 1:
        raise ValueError(f"a target failure rate must lie in [{3 / HISTORY_LIMIT:g}, 1), not {target}")
    return math.ceil(3 / target - 1e-9)


def consecutive_passes(entries: Iterable[HistoryEntry], *, seal: str, since: datetime | None = None) -> int:
    """Passes in a row, newest back, under `seal` and after `since`; any other kind under the seal ends
    the count, and entries under another seal are skipped (they judged other bytes)."""
    count = 0
    for entry in reversed(list(entries)):
        if entry.seal != seal or (since is not None and entry.at <= since):
            continue
        if entry.kind is not Kind.PASS:
            break
        count += 1
    return count


class LiftProposal(BaseModel):
    """A freeze whose property has passed enough runs in a row to be lifted."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    freeze_id: str
    property_id: str
    passes: int
    needed: int
    target: float
    run_ids: tuple[str, ...]  # the first and last run of the streak

    def line(self) -> str:
        return (
            f"lift freeze {self.freeze_id}: {self.property_id} passed {self.passes} runs in a row"
            f" (needed {self.needed} to bound its failure rate below {self.target:g} at 95%)"
        )


def lift_due(
    history: History,
    frozen: Mapping[str, str],
    *,
    seal: str,
    since: Mapping[str, datetime] | None = None,
    target: float = LIFT_TARGET,
) -> tuple[LiftProposal, ...]:
    """The freezes (`frozen`: property id -> freeze id) whose property has passed at least
    `runs_needed(target)` consecutive recorded runs under `seal`, counted after `since[property]`
    (when the freeze began, if known)."""
    needed = runs_needed(target)
    proposals = []
    for pid in sorted(frozen):
        entries: Sequence[HistoryEntry] = history.of(pid)
        passes = consecutive_passes(entries, seal=seal, since=(since or {}).get(pid))
        if passes >= needed:
            streak = [e for e in entries if e.seal == seal][-passes:]
            proposals.append(
                LiftProposal(
                    freeze_id=frozen[pid],
                    property_id=pid,
                    passes=passes,
                    needed=needed,
                    target=target,
                    run_ids=(streak[0].run_id, streak[-1].run_id),
                )
            )
    return tuple(proposals)
