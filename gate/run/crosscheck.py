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
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gate.core.card.card import HarnessEvent
from gate.core.suite.fold import Judge, Tally
from gate.core.suite.trial import FaultOrigin, Observation, TrialSpec
from gate.core.trust.crosscheck import (
    REPRODUCE,
    Pair,
    Settlement,
    WorkerDisagreement,
    choose,
    combine,
    settle,
)
from gate.core.trust.crosscheck_summary import CrossCheckSummary, summarize
from gate.core.trust.hitrate import outliers
from gate.core.trust.replay import StatRow, caught, choose_replays
from gate.core.verdicts.verdict import Band, Outcome, OutcomeKind
from gate.io.snapshot import LocalInputs
from gate.run.executor import Executor
from gate.run.replays import NO_SECOND, discard, replay
from gate.run.waves import coordinator_canary

Key = tuple[str, str, int]
RunElsewhere = Callable[[Sequence[TrialSpec], LocalInputs, frozenset[str]], Iterator[Observation]]
MAX_GROUPS_AT_ONCE = 8  # groups (one per avoided worker set) in flight together
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
) -> CrossChecked:
    """Cross-check the chosen trials in place in `tallies` (a counted outcome only ever gets worse)."""
    workers = {t.prop.id: dict(Counter(o.worker_id for o in t.observations)) for t in tallies}
    rates = {t.prop.id: _rates(t) for t in tallies if t.prop.band is Band.STATISTICAL and len(workers[t.prop.id]) > 1}
    flagged = outliers(rates)
    events: list[HarnessEvent] = [
        HarnessEvent(kind="hit_rate_outlier", property_id=o.property_id, detail=o.line()) for o in flagged
    ]
    candidates = {
        t.prop.id: (t.prop.band, [o.trial_index for o in t.outcomes if o.kind is not OutcomeKind.FAULT])
        for t in tallies
    }
    chosen = choose(seed, candidates, share)
    count = sum(len(v) for v in chosen.values())
    stat = choose_replays(seed, _stat_rows(tallies), share)
    elsewhere: RunElsewhere | None = getattr(executor, "run_elsewhere", None)
    if not (count or stat.count) or elsewhere is None:
        note = "" if not (count or stat.count) else LOCAL_NOTE
        summary = summarize(
            share=share, seed=seed, chosen=count, checked=0, note=note, outliers=flagged, replays_chosen=stat.count
        )
        return CrossChecked(summary, workers, tuple(events))
    # Enrolled workers are untrusted: a chosen trial whose check never came back from another worker
    # (none there, lost, answered by the worker it had to avoid, or stolen off another's queue) is unproven.
    strict = bool(getattr(executor, "untrusted_workers", False))
    step = Step(elsewhere, tallies, sent, inputs, judge, events, strict=strict)
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
        replays_checked=replayed.checked,
        unresolved=replayed.unresolved,
        discarded=sorted(liars),
        reran=reran,
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
            rows[tally.prop.id] = StatRow(rule, tuple((o.trial_index, o.worker_id, c.kind) for o, c in trials))
    return rows


def _rates(tally: Tally) -> dict[str, tuple[int, int]]:
    rates: dict[str, tuple[int, int]] = {}
    for obs, outcome in zip(tally.observations, tally.outcomes, strict=True):
        if outcome.kind in (OutcomeKind.HIT, OutcomeKind.MISS):
            hits, trials = rates.get(obs.worker_id, (0, 0))
            rates[obs.worker_id] = (hits + (outcome.kind is OutcomeKind.HIT), trials + 1)
    return rates


class Step:
    """One run's cross-check traffic: second runs, then tie-breaks; counted outcomes replaced in place."""

    def __init__(
        self,
        elsewhere: RunElsewhere,
        tallies: Sequence[Tally],
        sent: Mapping[Key, TrialSpec],
        inputs: LocalInputs,
        judge: Judge,
        events: list[HarnessEvent],
        *,
        strict: bool = False,
    ) -> None:
        self.run_elsewhere, self.sent, self.inputs, self.judge, self.events = elsewhere, sent, inputs, judge, events
        self.strict = strict
        self.tallies = {t.prop.id: t for t in tallies}
        self.checked = 0

    def run(self, chosen: Mapping[str, tuple[int, ...]]) -> tuple[list[WorkerDisagreement], list[Settlement]]:
        primaries: dict[Key, tuple[Observation, Outcome]] = {}
        for property_id, indices in chosen.items():
            tally = self.tallies[property_id]
            by_index = {o.trial_index: (o, c) for o, c in zip(tally.observations, tally.outcomes, strict=True)}
            for index in indices:
                obs, outcome = by_index[index]
                primaries[obs.key] = (obs, outcome)
        seconds = self.elsewhere({key: frozenset({obs.worker_id}) for key, (obs, _) in primaries.items()}, 1)
        disagreements: list[WorkerDisagreement] = []
        disputed: dict[Key, tuple[Observation, Observation]] = {}
        for key, (obs, outcome) in primaries.items():
            judged = [(o, c) for o, c in seconds.get(key, []) if c.kind is not OutcomeKind.FAULT]
            if not judged:
                if self.strict:
                    self.unproven(key, obs, outcome)
                continue
            self.checked += 1
            pair = combine((obs, outcome), judged[0])
            self.count(pair)
            if pair.disagreement is not None:
                disagreements.append(pair.disagreement)
                if pair.disagreement.facts:
                    disputed[key] = (obs, judged[0][0])
        settlements: list[Settlement] = []
        if disputed:
            avoid = {key: frozenset({a.worker_id, b.worker_id}) for key, (a, b) in disputed.items()}
            thirds = self.elsewhere(avoid, REPRODUCE)
            for key, (a, b) in disputed.items():
                reruns = thirds.get(key, [])
                settlements.append(settle(a, b, [o for o, _ in reruns]))
                for rerun in reruns:
                    if rerun[1].kind is not OutcomeKind.FAULT:
                        self.count(combine(self.counted(key[1], key[2]), rerun))
        return disagreements, settlements

    def elsewhere(
        self, avoid: Mapping[Key, frozenset[str]], times: int
    ) -> dict[Key, list[tuple[Observation, Outcome]]]:
        """Each key's spec, `times` over, on a worker outside its avoid set; judged, by key."""
        if not avoid:
            return {}
        groups: dict[frozenset[str], list[TrialSpec]] = {}
        for key, workers in avoid.items():
            groups.setdefault(workers, []).extend([self.sent[key]] * times)
        got: dict[Key, list[tuple[Observation, Outcome]]] = {}
        for workers, observed in self._each_group(groups):
            for obs in observed:
                spec = self.sent.get(obs.key)
                if spec is None or obs.key not in avoid:
                    continue
                if obs.worker_id in workers and obs.fault is None:
                    # The executor must route around these workers; an answer from one of them is no check.
                    detail = f"trial {obs.trial_index} came back from {obs.worker_id}, which it had to avoid"
                    self.events.append(
                        HarnessEvent(kind="cross_check_same_worker", property_id=obs.property_id, detail=detail)
                    )
                    continue
                obs = coordinator_canary(spec, obs, self.events)
                got.setdefault(obs.key, []).append((obs, self.judge(self.tallies[obs.property_id].prop, obs)))
        for key, answers in got.items():
            faults = [o for o, c in answers if c.kind is OutcomeKind.FAULT]
            if faults:
                detail = f"trial {key[2]}: a cross-check run could not be observed: {faults[0].fault}"[:300]
                self.events.append(HarnessEvent(kind="cross_check_unobserved", property_id=key[1], detail=detail))
        return got

    def _each_group(
        self, groups: Mapping[frozenset[str], list[TrialSpec]]
    ) -> list[tuple[frozenset[str], list[Observation]]]:
        """Every group sent at once, one thread each (a group waits on its worker, not on the others);
        judging stays on this thread. An executor that raises raises here."""

        def collect(workers: frozenset[str], specs: list[TrialSpec]) -> list[Observation]:
            return list(self.run_elsewhere(specs, self.inputs, workers))

        if len(groups) == 1:
            [(workers, specs)] = groups.items()
            return [(workers, collect(workers, specs))]
        with ThreadPoolExecutor(max_workers=min(MAX_GROUPS_AT_ONCE, len(groups)), thread_name_prefix="xcheck") as pool:
            futures = [(workers, pool.submit(collect, workers, specs)) for workers, specs in groups.items()]
            return [(workers, future.result()) for workers, future in futures]

    def unproven(self, key: Key, obs: Observation, outcome: Outcome) -> None:
        """An unchecked result from an untrusted worker carries nothing: a miss stays a miss, anything
        better becomes a fault nobody proved outside the patch (no credit), so the row cannot pass on it."""
        if outcome.kind is OutcomeKind.MISS:
            return
        detail = f"cross-check of {obs.worker_id}'s result never came back from another worker"
        fault = Observation.harness_fault(self.sent[key], detail, origin=FaultOrigin.UNKNOWN, worker_id=obs.worker_id)
        self.count(Pair(observation=fault, outcome=self.judge(self.tallies[key[1]].prop, fault)))
        event = HarnessEvent(kind="cross_check_missing", property_id=key[1], detail=f"trial {key[2]}: {detail}")
        self.events.append(event)

    def counted(self, property_id: str, trial_index: int) -> tuple[Observation, Outcome]:
        """The observation and outcome that count for one trial now."""
        tally = self.tallies[property_id]
        at = next(i for i, o in enumerate(tally.observations) if o.trial_index == trial_index)
        return tally.observations[at], tally.outcomes[at]

    def count(self, pair: Pair) -> None:
        """Put the pair's counted observation and outcome in place of the trial's in its tally."""
        tally = self.tallies[pair.observation.property_id]
        at = next(i for i, o in enumerate(tally.observations) if o.trial_index == pair.observation.trial_index)
        tally.observations[at] = pair.observation
        tally.outcomes[at] = pair.outcome


def _settlement_events(settlements: Sequence[Settlement]) -> list[HarnessEvent]:
    return [
        HarnessEvent(
            kind=f"cross_check_{s.settled}",
            property_id=s.property_id,
            detail=f"trial {s.trial_index}: {s.detail}"[:300],
        )
        for s in settlements
    ]
