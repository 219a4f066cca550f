"""Second runs: a trial's spec run again on a worker outside a given set, judged on the coordinator, and
the outcome that counts put in place in its tally. The cross-checks of safety and contract trials
(gate.run.crosscheck) and the replays of statistical ones (gate.run.replays) both go through a `Step`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from gate.core.card.card import HarnessEvent
from gate.core.suite.fold import Judge, Tally
from gate.core.suite.trial import FaultOrigin, Observation, Side, TrialKey, TrialSpec
from gate.core.trust.crosscheck import (
    REPRODUCE,
    Pair,
    Settlement,
    WorkerDisagreement,
    combine,
    settle,
    settle_by_owner,
)
from gate.core.verdicts.verdict import Outcome, OutcomeKind
from gate.io.snapshot import LocalInputs
from gate.run.waves import coordinator_canary

Key = TrialKey
RunElsewhere = Callable[[Sequence[TrialSpec], LocalInputs, frozenset[str]], Iterator[Observation]]
MAX_GROUPS_AT_ONCE = 8  # groups (one per avoided worker set) in flight together


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
        trusted: frozenset[str] = frozenset(),
    ) -> None:
        self.run_elsewhere, self.sent, self.inputs, self.judge, self.events = elsewhere, sent, inputs, judge, events
        self.strict = strict
        self.trusted = trusted  # owned workers: a disagreement with one is settled for it, with no third worker
        self.tallies = {t.prop.id: t for t in tallies}
        self.checked = 0
        self.verified_by: Counter[str] = Counter()  # worker -> second runs it answered (checks, replays, reruns)

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
        for key, (a, b) in list(disputed.items()):
            if (by_owner := settle_by_owner(a, b, self.trusted)) is not None:
                settlements.append(by_owner)
                del disputed[key]
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
                self.verified_by[obs.worker_id] += 1
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
        better becomes a fault nobody proved outside the patch (no credit), so the row cannot pass on it. On a
        paired property's base side the patch gains from a miss: there a hit stays, anything else is the fault."""
        if outcome.kind is (OutcomeKind.HIT if obs.side is Side.BASE else OutcomeKind.MISS):
            return
        detail = f"cross-check of {obs.worker_id}'s result never came back from another worker"
        fault = Observation.harness_fault(self.sent[key], detail, origin=FaultOrigin.UNKNOWN, worker_id=obs.worker_id)
        self.count(Pair(observation=fault, outcome=self.judge(self.tallies[key[1]].prop, fault)))
        event = HarnessEvent(kind="cross_check_missing", property_id=key[1], detail=f"trial {key[2]}: {detail}")
        self.events.append(event)

    def counted(self, property_id: str, trial_index: int, side: Side = Side.PATCH) -> tuple[Observation, Outcome]:
        """The observation and outcome that count for one trial (of `side`: a paired property's base trial) now."""
        observations, outcomes = _side_of(self.tallies[property_id], side)
        at = next(i for i, o in enumerate(observations) if o.trial_index == trial_index)
        return observations[at], outcomes[at]

    def count(self, pair: Pair) -> None:
        """Put the pair's counted observation and outcome in place of the trial's (of its side) in its tally."""
        observations, outcomes = _side_of(self.tallies[pair.observation.property_id], pair.observation.side)
        at = next(i for i, o in enumerate(observations) if o.trial_index == pair.observation.trial_index)
        observations[at] = pair.observation
        outcomes[at] = pair.outcome


def _side_of(tally: Tally, side: Side) -> tuple[list[Observation], list[Outcome]]:
    """The tally's observations and outcomes of one side (the base side: a paired property's base-tree trials)."""
    if side is Side.BASE:
        return tally.base_observations, tally.base_outcomes
    return tally.observations, tally.outcomes
