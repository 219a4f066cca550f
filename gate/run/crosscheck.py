"""The run's cross-checks, after every primary result is in: the seeded choice of trials goes again,
spec for spec, to a worker other than the one that ran it (`Executor.run_elsewhere`); each pair is
folded by `gate.core.trust.crosscheck.combine` (the worse outcome counts), and a fact disagreement goes to
a third worker, twice, for the tie-break. Statistical rows get the hit-rate comparison, and their chosen
trials are replayed (`gate.run.replays`: the rules are `gate.core.trust.replay`'s); a worker any tie-break
contradicts has every counted result of the run discarded and run again on the others.

An executor without `run_elsewhere` (the local pool: one trusted machine, where another pool process
proves nothing) cross-checks nothing, and the card's summary says so.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gate.core.card.card import HarnessEvent
from gate.core.suite.fold import Judge, Tally
from gate.core.suite.trial import TrialSpec
from gate.core.trust.crosscheck import (
    Settlement,
    choose,
)
from gate.core.trust.crosscheck_summary import CrossCheckSummary, summarize
from gate.core.trust.hitrate import outliers
from gate.core.trust.replay import StatRow, caught, choose_replays
from gate.core.verdicts.verdict import Band, OutcomeKind
from gate.io.snapshot import LocalInputs
from gate.run.executors.base import Executor
from gate.run.replays import NO_SECOND, discard, replay
from gate.run.secondruns import Key, RunElsewhere, Step

LOCAL_NOTE = "local pool: one trusted machine, nothing to cross-check against"


@dataclass(frozen=True)
class CrossChecked:
    summary: CrossCheckSummary
    workers: dict[str, dict[str, int]]  # property id -> worker -> primary trials
    events: tuple[HarnessEvent, ...]


def new_seed() -> str:
    """The run's cross-check seed: drawn here, never sent to a worker, printed on the card afterwards."""
    return secrets.token_hex(16)


def cross_check(
    executor: Executor,
    tallies: Sequence[Tally],
    sent: Mapping[Key, TrialSpec],
    inputs: LocalInputs,
    judge: Judge,
    *,
    share: float,
    seed: str,
    escape: float = 0.0,
) -> CrossChecked:
    """Cross-check the chosen trials in place in `tallies` (a counted outcome only ever gets worse); `escape`
    sizes the statistical margin replays (`gate.core.trust.replay.unreplayed`)."""
    workers = {t.prop.id: dict(Counter(o.worker_id for o in t.observations)) for t in tallies}
    # Owned workers' results need no second run (only an executor with a registry names any).
    trusted = frozenset(getattr(executor, "trusted_workers", frozenset()))
    rates = {t.prop.id: _rates(t) for t in tallies if t.prop.band is Band.STATISTICAL and len(workers[t.prop.id]) > 1}
    flagged = outliers(rates)
    events: list[HarnessEvent] = [
        HarnessEvent(kind="hit_rate_outlier", property_id=o.property_id, detail=o.line()) for o in flagged
    ]
    candidates = {
        t.prop.id: (
            t.prop.band,
            [
                c.trial_index
                for o, c in zip(t.observations, t.outcomes, strict=True)
                if c.kind is not OutcomeKind.FAULT and o.worker_id not in trusted
            ],
        )
        for t in tallies
    }
    chosen = choose(seed, candidates, share)
    count = sum(len(v) for v in chosen.values())
    stat = choose_replays(seed, _stat_rows(tallies), share, trusted, escape)
    elsewhere: RunElsewhere | None = getattr(executor, "run_elsewhere", None)
    if not (count or stat.count) or elsewhere is None:
        note = "" if not (count or stat.count) else LOCAL_NOTE
        summary = summarize(
            share=share,
            seed=seed,
            chosen=count,
            checked=0,
            note=note,
            outliers=flagged,
            replays_chosen=stat.count,
            replay_escape=escape,
            trusted=trusted,
        )
        return CrossChecked(summary, workers, tuple(events))
    # Enrolled workers are untrusted: a chosen trial whose check never came back from another worker
    # (none there, lost, answered by the worker it had to avoid, or stolen off another's queue) is unproven.
    strict = bool(getattr(executor, "untrusted_workers", False))
    step = Step(elsewhere, tallies, sent, inputs, judge, events, strict=strict, trusted=trusted)
    disagreements, settlements = step.run(chosen) if count else ([], [])
    replayed = replay(step, stat)
    liars = caught([*settlements, *replayed.settlements])
    reran = discard(step, liars)
    notes = [f"{count - step.checked} chosen trial(s) found no second worker"] if step.checked < count else []
    if replayed.unchecked:
        notes.append(f"{NO_SECOND} ({replayed.unchecked} chosen replay(s))")
    summary = summarize(
        share=share,
        seed=seed,
        chosen=count,
        checked=step.checked,
        note="; ".join(notes),
        disagreements=[*disagreements, *replayed.disagreements],
        settlements=[*settlements, *replayed.settlements],
        outliers=flagged,
        replays_chosen=stat.count,
        replays_for_margin=stat.for_margin,
        replay_escape=escape,
        replays_checked=replayed.checked,
        unresolved=replayed.unresolved,
        discarded=sorted(liars),
        reran=reran,
        trusted=trusted,
        verified_by=step.verified_by,
    )
    events.extend(_settlement_events([*settlements, *replayed.settlements]))
    return CrossChecked(summary, workers, tuple(events))


def _stat_rows(tallies: Sequence[Tally]) -> dict[str, StatRow]:
    """Each statistical tally as the replay rule reads it: its band rule and its trials' workers and outcomes."""
    rows: dict[str, StatRow] = {}
    for tally in tallies:
        rule = tally.prop.rule()
        if tally.prop.band is Band.STATISTICAL and rule is not None:
            trials = zip(tally.observations, tally.outcomes, strict=True)
            base = zip(tally.base_observations, tally.base_outcomes, strict=True)
            rows[tally.prop.id] = StatRow(
                rule,
                tuple((o.trial_index, o.worker_id, c.kind) for o, c in trials),
                tuple((o.trial_index, o.worker_id, c.kind) for o, c in base),
            )
    return rows


def _rates(tally: Tally) -> dict[str, tuple[int, int]]:
    rates: dict[str, tuple[int, int]] = {}
    for obs, outcome in zip(tally.observations, tally.outcomes, strict=True):
        if outcome.kind in (OutcomeKind.HIT, OutcomeKind.MISS):
            hits, trials = rates.get(obs.worker_id, (0, 0))
            rates[obs.worker_id] = (hits + (outcome.kind is OutcomeKind.HIT), trials + 1)
    return rates


def _settlement_events(settlements: Sequence[Settlement]) -> list[HarnessEvent]:
    return [
        HarnessEvent(
            kind=f"cross_check_{s.settled}",
            property_id=s.property_id,
            detail=f"trial {s.trial_index}: {s.detail}"[:300],
        )
        for s in settlements
    ]
