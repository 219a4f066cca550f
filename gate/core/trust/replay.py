"""Statistical replays: a worker lying on statistical trials is caught, or its lies cannot matter. Pure.

Every trial has a coordinator-given seed, so an honest worker replaying a statistical trial with the
same spec gets the same outcome whenever the probe draws its randomness from the seed. The rules, each
in one place here (the I/O is `gate.run.replays`):

1. Which trials are replayed (`choose_replays`), drawn after every primary is in, from a seed no worker
   has seen: `share` of each worker's judged trials of each statistical row (at least one each when
   `share` > 0), and, on a row whose counts would pass, enough of each worker's hits (`unreplayed`) that
   the lies able to turn the row, at least `margin` + 1 of them, all go unreplayed with probability at
   most `escape` (the suite's `replay_escape`). At the default `escape` of 0 that is all but `margin` of
   each worker's hits: the hits of any one worker that no other worker saw could all be misses and the
   row would still pass.
   A paired row is replayed by whole pairs (its base trial with its patch trial, on one other worker):
   every pair with a patch hit or a base miss, the two claims a lie that helps the patch can make; what
   is left unreplayed (patch missed, base hit) only ever counts against the patch.
2. What a replay means (`compare`): the same outcome is an agreement and the primary stands; a different
   outcome is a dispute, in which the worse outcome counts and a third worker replays the trial
   `REPLAY_REPRODUCE` times (`gate.core.trust.crosscheck.settle`, the rule of the safety/contract
   cross-checks: every run must reproduce one side's facts exactly). On a paired row's base side the
   conservative outcome is the other way round, so a base trial's dispute gets no tie-break: the trial
   is left unproven, a fault, and the row cannot pass (`gate.run.replays`).
3. What a settled dispute means (`on_rows`, `caught`, `unproven`): a quarantine catches the contradicted
   worker when it claimed the better outcome (a lie that could buy a pass) and no dispute on the row
   proved nondeterministic; anything else (no third worker, a nondeterministic probe, a fault, a
   worker contradicted on a worse claim) leaves the trial unproven, an unknown-origin fault, so its
   row cannot pass. A frame by a probe that ignores the seed thus only ever costs the patch.
4. A caught worker (from any band's tie-break) has every result it gave in the run discarded and run
   again on other workers (`discards`); a trial whose rerun never comes back is unproven.

Why that bounds a single liar on the fixed band rule: a replayed lie (a reported outcome that differs
from the seeded truth) is a dispute, which blocks the row or gets the liar caught and its results run
again by the others; so in a row that passes on its word every lie is among the liar's unreplayed
hits. A row whose truth fails needs at least `margin` + 1 lies (hits - lies < min_hits), and the
replayed hits are the lowest-pointed ones, a uniform draw the liar cannot foresee: all of `lies` go
unreplayed with probability C(kept, lies) / C(hits, lies), which `unreplayed` holds to `escape` or less.
At `escape` 0 no more than `margin` hits are kept, so the true hits are at least hits - margin = min_hits:
the row would have passed without the lies, and a liar raises the chance a failing row passes by nothing
(it can only lower it); the share, besides, catches it at random. Above 0, a row whose truth fails passes
with probability at most `escape` over the replay seed, whatever one worker lies on.
`benchmarks/forger_statistical.py` measures it, with what it costs. Judging each worker's share against
the band on its own was weighed and not taken: at 8 of 10 and a true rate of 0.95 it passes 0.955 of
honest rows over 2 workers and 0.60 over 3 (pooled: 0.988), and a liar still lifts its own share (at a
true rate of 0.75 over 2 workers, 0.40 honest against 0.63 with a liar).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from gate.core.suite.trial import Observation, TrialKey
from gate.core.trust.crosscheck import RANK, Pair, Settled, Settlement, Side, WorkerDisagreement, differing, observed
from gate.core.verdicts.bands import FixedRule, SprtRule
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import Outcome, OutcomeKind

BandRule = FixedRule | SprtRule | PairedRule
# Runs of a statistical dispute's tie-break worker, all of which must reproduce one side: an output of
# few values repeats by chance (two runs of a coin agree half the time, four an eighth).
REPLAY_REPRODUCE = 4
JUDGED = (OutcomeKind.HIT, OutcomeKind.MISS)


@dataclass(frozen=True)
class StatRow:
    """One statistical row as the primaries left it: its band rule and each trial's (index, worker, outcome);
    for a paired row also its base-tree trials'."""

    rule: BandRule
    trials: tuple[tuple[int, str, OutcomeKind], ...]
    base: tuple[tuple[int, str, OutcomeKind], ...] = ()


@dataclass(frozen=True)
class Choice:
    """The replays of one run: trial indices by property, and how many of them the margin rule added."""

    indices: Mapping[str, tuple[int, ...]]
    for_margin: int = 0

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.indices.values())


def _point(seed: str, property_id: str, trial_index: int) -> float:
    # A domain of its own: which statistical trials are replayed tells nothing of the other choices.
    digest = hashlib.sha256(f"replay\0{seed}\0{property_id}\0{trial_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def margin(rule: BandRule, hits: int, trials: int) -> int:
    """How many of the row's hits could be misses with the row still passing; -1 when it does not pass.
    A paired row passes on its pairs, not on the patch side's hits alone: no margin, every hit is replayed."""
    if isinstance(rule, PairedRule):
        return 0 if hits else -1
    if not rule.decide(hits=hits, trials=trials).passed:
        return -1
    spare = 0
    while spare < hits and rule.decide(hits=hits - spare - 1, trials=trials).passed:
        spare += 1
    return spare


def unreplayed(hits: int, spare: int, escape: float) -> int:
    """How many of one worker's `hits` may go unreplayed on a row with margin `spare`: the most that leave the
    `spare` + 1 lies able to turn the row all unreplayed with probability at most `escape` (0: `spare`)."""
    if not 0 <= escape < 1:
        raise ValueError(f"escape {escape} outside [0, 1)")
    lies = spare + 1
    if escape == 0 or hits < lies:
        return min(hits, spare)
    bound = Fraction(escape) * math.comb(hits, lies)
    low, high = spare, hits - 1  # keeping all the hits lets every lie through
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if math.comb(mid, lies) <= bound else (low, mid - 1)
    return low


def choose_replays(
    seed: str,
    rows: Mapping[str, StatRow],
    share: float,
    trusted: frozenset[str] = frozenset(),
    escape: float = 0.0,
) -> Choice:
    """The statistical trials to replay on another worker (rule 1); nothing when `share` is 0. A `trusted`
    worker's (an owned one's) trials are never chosen: its hits count as true ones, so the margin still bounds
    every other worker's unreplayed hits. `escape` sizes the margin replays of fixed and sequential rows."""
    if share <= 0:
        return Choice({})
    chosen: dict[str, tuple[int, ...]] = {}
    added = 0
    for property_id, row in sorted(rows.items()):
        judged = [(i, w, k) for i, w, k in row.trials if k in JUDGED]
        by_worker: dict[str, list[tuple[int, OutcomeKind]]] = {}
        for index, worker, kind in judged:
            if worker not in trusted:
                by_worker.setdefault(worker, []).append((index, kind))
        picks: set[int] = set()
        for trials in by_worker.values():
            ranked = sorted(trials, key=lambda t: _point(seed, property_id, t[0]))
            # The lowest point stands in when the share picks none: as unguessable as the rest.
            picks.update([i for i, _ in ranked if _point(seed, property_id, i) < share] or [ranked[0][0]])
        # A row that can fail anyway (a fault, a timeout, hits below the band) needs no more: lies only add hits.
        spare = margin(row.rule, sum(k is OutcomeKind.HIT for _, _, k in judged), len(judged))
        if spare >= 0 and len(judged) == len(row.trials):
            paired = isinstance(row.rule, PairedRule)
            for trials in by_worker.values():
                hits = [i for i, k in trials if k is OutcomeKind.HIT]
                unchecked = sorted((i for i in hits if i not in picks), key=lambda i: _point(seed, property_id, i))
                kept = spare if paired else unreplayed(len(hits), spare, escape)
                more = unchecked[: max(0, len(unchecked) - kept)]
                picks.update(more)
                added += len(more)
        if isinstance(row.rule, PairedRule) and len(judged) == len(row.trials):
            more = _base_misses(row, picks)  # even with no patch hit: all-miss pairs are ties, and ties pass
            picks.update(more)
            added += len(more)
        if picks:
            chosen[property_id] = tuple(sorted(picks))
    return Choice(chosen, added)


def _base_misses(row: StatRow, picks: set[int]) -> list[int]:
    """A paired row's pairs whose base side missed and are not picked yet: a base miss is the base side's lie
    that helps the patch (it turns a pair the patch lost into a tie), so each is replayed like a patch hit."""
    if any(k not in JUDGED for _, _, k in row.base):
        return []  # a base fault or timeout already keeps the row from passing
    return sorted(i for i, _, k in row.base if k is OutcomeKind.MISS and i not in picks)


def compare(first: tuple[Observation, Outcome], second: tuple[Observation, Outcome]) -> Pair:
    """A primary and its replay (rule 2): the worse outcome counts; a different outcome is a dispute naming
    both (facts that differ while the outcomes agree are the probe's own business: no dispute)."""
    (oa, a), (ob, b) = first, second
    kept, counted = max(
        first, second, key=lambda pair: (RANK[pair[1].kind], pair[1].model_dump_json(), pair[0].model_dump_json())
    )
    if a.kind is b.kind:
        return Pair(observation=kept, outcome=counted)
    sides = sorted((Side.of(oa, a), Side.of(ob, b)), key=lambda s: s.model_dump_json())
    disagreement = WorkerDisagreement(
        property_id=oa.property_id,
        trial_index=oa.trial_index,
        sides=(sides[0], sides[1]),
        facts=differing(oa, ob) if observed(oa) and observed(ob) else (),
        counted=counted.kind,
    )
    return Pair(observation=kept, outcome=counted, disagreement=disagreement)


def caught(settlements: Iterable[Settlement]) -> frozenset[str]:
    """Workers a deterministic tie-break contradicted (rule 3), whatever the band."""
    return frozenset(s.quarantined for s in settlements if s.settled is Settled.QUARANTINE and s.quarantined)


def unproven(settlement: Settlement) -> bool:
    """Whether a statistical dispute stays open (rule 3): no quarantine settled it, so the row cannot pass."""
    return settlement.settled is not Settled.QUARANTINE


def on_rows(settlements: Iterable[Settlement], disputes: Iterable[WorkerDisagreement]) -> tuple[Settlement, ...]:
    """Rule 3 over a run's statistical tie-breaks: a quarantine stands only against a worker that claimed
    the better outcome for the patch (a lie that could buy a pass), and only on a row none of whose
    disputes proved nondeterministic. A probe that ignores the seed makes honest workers disagree, and an
    output of few values repeats by chance on the tie-break, so anything else is no proof: it stays open."""
    settled = tuple(settlements)
    claimed = {(d.property_id, d.trial_index, side.worker): side.outcome for d in disputes for side in d.sides}
    noisy = {s.property_id for s in settled if s.settled is Settled.NONDETERMINISTIC}

    def stands(s: Settlement) -> bool:
        liar = claimed.get((s.property_id, s.trial_index, s.quarantined or ""))
        honest = claimed.get((s.property_id, s.trial_index, s.sided_with or ""))
        better = liar is not None and honest is not None and RANK[liar] < RANK[honest]
        return better and s.property_id not in noisy

    def demoted(s: Settlement) -> Settlement:
        why = (
            "another dispute on the row was nondeterministic"
            if s.property_id in noisy
            else "it claimed the worse outcome"
        )
        detail = f"{s.detail}; no proof against {s.quarantined}: {why}"
        return s.model_copy(update={"settled": Settled.NONDETERMINISTIC, "quarantined": None, "detail": detail[:300]})

    return tuple(demoted(s) if s.settled is Settled.QUARANTINE and not stands(s) else s for s in settled)


def discards(counted: Iterable[Observation], liars: frozenset[str]) -> tuple[TrialKey, ...]:
    """The trials to run again without the caught workers (rule 4): every trial whose counted result is theirs."""
    return tuple(sorted({obs.key for obs in counted if obs.worker_id in liars}))
