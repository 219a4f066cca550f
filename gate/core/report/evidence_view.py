"""The reviewers' view of a card's evidence: per property, in card row order, every trial that missed,
timed out or faulted (by trial index, up to a limit) and a deterministic sample of the passing ones,
each with what its record holds, as terminal text or JSON. A paired row's base-tree trials are shown
the same way in a view of their own, marked as the base's. Pure: `gate evidence` (gate.cli.evidence)
reads the card and its verified records.

Everything a record holds is the patch's to choose. In the text every such value follows a fixed
label on a line of its own, escaped by `one_line`: no control character, ANSI sequence or bidi mark
reaches the terminal raw, and no probe output can start a line. The JSON is ASCII (`json.dumps`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord, record_digest
from gate.core.escaping import one_line
from gate.core.suite.trial import Captured, FileChange, Side
from gate.core.verdicts.verdict import OutcomeCounts, OutcomeKind

DEFAULT_LIMIT = 20  # missed, timed-out and faulted trials shown per property
DEFAULT_PASSES = 3  # passing trials sampled per property
HEAD_CHARS = 300  # of each stream; the record keeps the whole captured head
DETAIL_CHARS = 1000  # of a check's message
WRITES_SHOWN = 20  # of the paths one trial changed

_PROBLEMS = (OutcomeKind.MISS, OutcomeKind.TIMEOUT, OutcomeKind.FAULT)


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


@dataclass(frozen=True)
class StreamHead:
    """The start of a captured stream as text, with the whole stream's length and sha256 as recorded.
    Bytes that are not UTF-8 show as `\\xNN`, so the head says which bytes the probe wrote."""

    text: str
    complete: bool  # `text` is the whole stream: neither the capture nor this view cut it
    length: int
    sha256: str

    @classmethod
    def of(cls, captured: Captured, chars: int = HEAD_CHARS) -> StreamHead:
        """The first `chars` characters of the captured head."""
        text = captured.data.decode("utf-8", "backslashreplace")
        complete = len(text) <= chars and not captured.truncated
        return cls(text=text[:chars], complete=complete, length=captured.length, sha256=captured.sha256)

    def to_data(self) -> dict[str, Any]:
        """`head`, `complete`, `length` and `sha256`, as JSON values."""
        return {"head": self.text, "complete": self.complete, "length": self.length, "sha256": self.sha256}

    def shown(self) -> str:
        """Length, sha256 and the escaped head on one line, or "empty"."""
        if self.length == 0:
            return "empty"
        cut = "" if self.complete else f", first {len(self.text)} characters"
        return f"{self.length} bytes, sha256 {one_line(self.sha256)}{cut}: {one_line(self.text)}"


@dataclass(frozen=True)
class ShownTrial:
    """One trial as its record holds it; `digest` names the record (`evidence/<digest>.json`)."""

    property_id: str
    trial_index: int
    kind: OutcomeKind
    detail: str  # the check's message, e.g. the failing assertion's, cut to DETAIL_CHARS
    check_raised: bool
    exit_code: int | None
    signal: int | None
    timed_out: bool
    oom_killed: bool
    duration_s: float
    fault: str | None
    stdout: StreamHead
    stderr: StreamHead
    writes: tuple[FileChange, ...]  # the first WRITES_SHOWN
    writes_total: int
    worker_id: str
    image_id: str
    seed: int | None  # the trial's seed: PROBEGATE_TRIAL_SEED=<seed> replays it
    digest: str
    side: Side = Side.PATCH  # the tree it ran on: a paired row's base trials are the base's

    @classmethod
    def of(cls, digest: str, record: TrialRecord) -> ShownTrial:
        """The trial `record` holds, named by `digest`, its store name."""
        obs, outcome = record.observation, record.outcome
        return cls(
            property_id=record.property_id,
            trial_index=record.trial_index,
            kind=outcome.kind,
            detail=_cut(outcome.detail, DETAIL_CHARS),
            check_raised=outcome.check_raised,
            exit_code=obs.exit_code,
            signal=obs.signal,
            timed_out=obs.timed_out,
            oom_killed=obs.oom_killed,
            duration_s=obs.duration_s,
            fault=obs.fault,
            stdout=StreamHead.of(obs.stdout),
            stderr=StreamHead.of(obs.stderr),
            writes=obs.writes[:WRITES_SHOWN],
            writes_total=len(obs.writes),
            worker_id=obs.worker_id,
            image_id=obs.image_id,
            seed=obs.seed,
            digest=digest,
            side=record.side,
        )

    def to_data(self) -> dict[str, Any]:
        """Every field as a JSON value; `kind` and each write's `change` as their string values."""
        return {
            "property_id": self.property_id,
            "trial_index": self.trial_index,
            "kind": str(self.kind),
            "detail": self.detail,
            "check_raised": self.check_raised,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "oom_killed": self.oom_killed,
            "duration_s": self.duration_s,
            "fault": self.fault,
            "stdout": self.stdout.to_data(),
            "stderr": self.stderr.to_data(),
            "writes": [{"change": str(w.change), "path": w.path} for w in self.writes],
            "writes_total": self.writes_total,
            "worker_id": self.worker_id,
            "image_id": self.image_id,
            "seed": self.seed,
            "digest": self.digest,
            "side": str(self.side),
        }

    def lines(self) -> list[str]:
        """One block: a fixed heading, then one labelled, escaped value per line, indented under it."""
        signal = "none" if self.signal is None else str(self.signal)
        code = "none" if self.exit_code is None else str(self.exit_code)
        out = [
            f"  {_on(self.side)}trial {self.trial_index}: {str(self.kind).upper()}, record {one_line(self.digest)}",
            f"    detail: {one_line(self.detail) or '(none)'}" + (" (the check raised)" if self.check_raised else ""),
            f"    exit: code {code}, signal {signal}, timed out {_yes(self.timed_out)}, "
            f"oom killed {_yes(self.oom_killed)}, {self.duration_s:.2f}s",
        ]
        if self.fault is not None:
            out.append(f"    fault: {one_line(self.fault)}")
        out += [f"    stdout: {self.stdout.shown()}", f"    stderr: {self.stderr.shown()}"]
        out += [f"    write: {one_line(str(w.change))} {one_line(w.path)}" for w in self.writes]
        if self.writes_total > len(self.writes):
            out.append(f"    writes: {self.writes_total - len(self.writes)} more not shown")
        elif not self.writes:
            out.append("    writes: none")
        seed = "none" if self.seed is None else str(self.seed)
        where = f"worker: {one_line(self.worker_id) or '(none)'}, image {one_line(self.image_id) or '(none)'}"
        out.append(f"    {where}, seed {seed}")
        return out


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _on(side: Side) -> str:
    return "base " if side is Side.BASE else ""


@dataclass(frozen=True)
class PropertyView:
    """One card row's trials to look at; `counts` are of its records (what `gate refold` re-folds)."""

    property_id: str
    band: str
    kind: str  # the card row's verdict
    counts: OutcomeCounts
    problems: tuple[ShownTrial, ...]  # missed, timed out or faulted, by trial index
    more: int  # such trials beyond the limit, not shown
    passes: tuple[ShownTrial, ...]  # the sample of hits, by trial index
    side: Side = Side.PATCH  # whose trials: a paired row has a second view, of its base-tree trials

    def count_line(self) -> str:
        """`id (band, card: kind): trials N, hits H, misses M, timeouts T, faults F`, escaped; a base view's
        says `id on the base (…)`."""
        c = self.counts
        where = " on the base" if self.side is Side.BASE else ""
        return (
            f"{one_line(self.property_id)}{where} ({one_line(self.band)}, card: {one_line(self.kind)}): "
            f"trials {c.trials}, hits {c.hit}, misses {c.miss}, timeouts {c.timeout}, faults {c.fault}"
        )

    def lines(self) -> list[str]:
        """The count line, then each problem's block, the rest's count and the sample's blocks."""
        out = [f"property {self.count_line()}"]
        if not self.problems and not self.more:
            out.append("  no trial missed, timed out or faulted")
        for trial in self.problems:
            out += trial.lines()
        if self.more:
            out.append(f"  not shown: {self.more} more missed, timed-out or faulted trials (raise the limit)")
        if self.counts.hit:
            out.append(f"  passing sample: {len(self.passes)} of {self.counts.hit} hits (smallest record digests)")
        for trial in self.passes:
            out += trial.lines()
        return out

    def to_data(self) -> dict[str, Any]:
        """The row's id, band, kind, counts, problems, `more` and passes as JSON values."""
        c = self.counts
        return {
            "id": self.property_id,
            "side": str(self.side),
            "band": self.band,
            "kind": self.kind,
            "counts": {"trials": c.trials, "hit": c.hit, "miss": c.miss, "timeout": c.timeout, "fault": c.fault},
            "problems": [t.to_data() for t in self.problems],
            "more": self.more,
            "passes": [t.to_data() for t in self.passes],
        }


@dataclass(frozen=True)
class Review:
    """The view of one card's evidence: its rows in card order, and property ids that have records
    but no row (a forged or hand-edited card; `gate refold` reports those too)."""

    run_id: str
    limit: int
    passes: int
    properties: tuple[PropertyView, ...]
    unbound: tuple[str, ...] = ()

    def to_text(self) -> str:
        """The view for a terminal: every value from a record escaped, after a fixed label."""
        lines = [f"run {one_line(self.run_id)}: each record is evidence/<record>.json beside the card"]
        for prop in self.properties:
            lines += prop.lines()
        lines += [f"records for a property the card has no row for: {one_line(pid)}" for pid in self.unbound]
        return "\n".join(lines) + "\n"

    def to_data(self) -> dict[str, Any]:
        """The whole view as JSON values (what `to_json` dumps)."""
        return {
            "run_id": self.run_id,
            "limit": self.limit,
            "passes": self.passes,
            "properties": [p.to_data() for p in self.properties],
            "unbound": list(self.unbound),
        }

    def to_json(self) -> str:
        """The view as one ASCII JSON document: control characters, bidi marks and lone surrogates
        arrive as \\u escapes."""
        return json.dumps(self.to_data(), indent=2, ensure_ascii=True) + "\n"


def by_digest(records: Iterable[TrialRecord]) -> dict[str, TrialRecord]:
    """Records in memory keyed as the store names them: the sha256 of their canonical bytes."""
    return {record_digest(record): record for record in records}


def build_review(
    card: VerdictCard,
    records: Mapping[str, TrialRecord],
    *,
    only: Collection[str] | None = None,
    limit: int = DEFAULT_LIMIT,
    passes: int = DEFAULT_PASSES,
) -> Review:
    """The review of `card` from its records by digest (`gate.io.evidence.verified_evidence`, or
    `by_digest`), for the rows whose id is in `only` (all when None)."""
    if limit < 0 or passes < 0:
        raise ValueError("limit and passes are counts, 0 or more")
    by_property: dict[str, list[tuple[str, TrialRecord]]] = {}
    for digest, record in records.items():
        by_property.setdefault(record.property_id, []).append((digest, record))
    views = []
    for row in card.properties:
        if only is not None and row.id not in only:
            continue
        mine = by_property.get(row.id, [])
        sizes = {"limit": limit, "passes": passes}
        patch = [(d, r) for d, r in mine if r.side is Side.PATCH]
        views.append(_view(row.id, str(row.band), str(row.kind), patch, **sizes))
        based = [(d, r) for d, r in mine if r.side is Side.BASE]
        if based or row.paired is not None:
            views.append(_view(row.id, str(row.band), str(row.kind), based, **sizes, side=Side.BASE))
    rows = {row.id for row in card.properties}
    unbound = tuple(sorted(pid for pid in by_property if pid not in rows and (only is None or pid in only)))
    return Review(run_id=card.run_id, limit=limit, passes=passes, properties=tuple(views), unbound=unbound)


def _view(
    property_id: str,
    band: str,
    kind: str,
    mine: list[tuple[str, TrialRecord]],
    *,
    limit: int,
    passes: int,
    side: Side = Side.PATCH,
) -> PropertyView:
    """One side's view of a row from its records by digest."""
    problems = sorted(((d, r) for d, r in mine if r.outcome.kind in _PROBLEMS), key=_in_trial_order)
    # The sample is the hits with the smallest record digests: a digest is a function of the
    # record alone, so every reading of one store shows the same hits whatever order the files
    # are listed in. It orients a reviewer and is no audit: a probe that grinds its own output
    # can steer which of its hits sort first. Misses, timeouts and faults are never sampled.
    hits = sorted(((d, r) for d, r in mine if r.outcome.kind is OutcomeKind.HIT), key=_digest)[:passes]
    return PropertyView(
        property_id=property_id,
        band=band,
        kind=kind,
        counts=OutcomeCounts.of([r.outcome for _, r in mine]),
        problems=tuple(ShownTrial.of(d, r) for d, r in problems[:limit]),
        more=max(0, len(problems) - limit),
        passes=tuple(ShownTrial.of(d, r) for d, r in sorted(hits, key=_in_trial_order)),
        side=side,
    )


def _in_trial_order(item: tuple[str, TrialRecord]) -> tuple[int, str]:
    # The digest breaks a tie: two records of one trial (which refold flags) still sort the same way.
    return (item[1].trial_index, item[0])


def _digest(item: tuple[str, TrialRecord]) -> str:
    return item[0]
