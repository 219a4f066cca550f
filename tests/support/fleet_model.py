"""An in-process model of one statistical row over a fleet of worker callables (fakes: no Docker, no
broker), decided by the run's own cross-check and replay code (`gate.run.crosscheck.cross_check`). The
bound in docs/explanation/distributed.md, `benchmarks/forger_statistical.py` and the adversarial unit tests measure
the replay rule with it. Nothing in a run uses it: it lives with the tests' support code, not in the
package.

A worker is a callable `(spec, worker) -> bool`, the hit it reports. The probe's truth is a function of
the trial's seed (`truth`), as the examples' probes make it: an honest worker reports it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gate.core.card.card import HarnessEvent
from gate.core.suite.fold import Tally
from gate.core.suite.plan import trial_seed
from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import Captured, ClockSpec, Observation, TrialSpec
from gate.core.trust.assignment import Rotation
from gate.core.trust.crosscheck_summary import CrossCheckSummary
from gate.core.verdicts.bands import FixedRule
from gate.core.verdicts.verdict import Band, Kind, Outcome, OutcomeCounts, OutcomeKind, kind_of
from gate.run.crosscheck import cross_check

Answer = Callable[[TrialSpec, str], bool]
IMAGE = "sha256:" + "0" * 64
PROPERTY = "rate"
HIT, MISS = b"hit", b"miss"
FROZEN_AT = datetime(2026, 3, 1, tzinfo=UTC)


def truth(rate: float) -> Callable[[TrialSpec], bool]:
    """A probe whose hit is a draw from the trial's seed: the same on every honest worker."""
    return lambda spec: random.Random(spec.seed).random() < rate


class FakeFleet:
    """Executor-shaped: `run` gives trial i to the round's place i mod n (the coordinator's rotation, one trial
    a batch: an owned worker has two places); `run_elsewhere` sends a group to one worker outside the avoid
    set, picked by `rng` (as the Celery executor picks one direct queue), an `owned` one when any is left (as
    it prefers them). Counts the trials each worker ran."""

    def __init__(
        self, workers: Mapping[str, Answer], rng: random.Random, *, strict: bool = True, owned: Sequence[str] = ()
    ) -> None:
        self.workers = dict(workers)
        self.names = tuple(workers)
        self.rng = rng
        self.untrusted_workers = strict  # enrolled workers: an unchecked chosen trial is unproven
        self.trusted_workers = frozenset(owned)  # the registry's owned workers: their results need no second run
        self.events: list[HarnessEvent] = []
        self.ran = 0
        self.seen: list[tuple[str, TrialSpec]] = []  # (worker, spec), in the order they ran

    def _answer(self, spec: TrialSpec, worker: str) -> Observation:
        self.ran += 1
        self.seen.append((worker, spec))
        data = HIT if self.workers[worker](spec, worker) else MISS
        stdout = Captured(data=data, length=len(data), sha256=_sha(data))
        return Observation.of(
            spec, exit_code=0, stdout=stdout, worker_id=worker, image_id=spec.image_id, seed=spec.seed
        )

    def run(self, specs: Sequence[TrialSpec], inputs: Any) -> Iterator[Observation]:
        places = Rotation(self.names, owned=self.trusted_workers).places  # an owned worker's places, as assigned
        for n, spec in enumerate(specs):
            yield self._answer(spec, places[n % len(places)])

    def run_elsewhere(
        self, specs: Sequence[TrialSpec], inputs: Any, avoid_workers: frozenset[str]
    ) -> Iterator[Observation]:
        others = [w for w in self.names if w not in avoid_workers]
        others = [w for w in others if w in self.trusted_workers] or others
        if not others:
            detail = f"{len(specs)} trial(s): no worker besides {sorted(avoid_workers)}"
            self.events.append(HarnessEvent(kind="no_cross_check_worker", property_id=PROPERTY, detail=detail))
            return
        worker = self.rng.choice(others)
        for spec in specs:
            yield self._answer(spec, worker)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def judge(prop: PropertySpec, obs: Observation) -> Outcome:
    """The row's check: the reported hit (a fault is a fault)."""
    if obs.fault is not None:
        return Outcome(trial_index=obs.trial_index, kind=OutcomeKind.FAULT, detail=obs.fault[:200])
    kind = OutcomeKind.HIT if obs.stdout.data == HIT else OutcomeKind.MISS
    return Outcome(trial_index=obs.trial_index, kind=kind)


def specs_for(run_id: str, rule: FixedRule) -> list[TrialSpec]:
    """The row's planned trials, each with the seed the planner derives from the run, property and index."""
    return [
        TrialSpec(
            run_id=run_id,
            property_id=PROPERTY,
            trial_index=i,
            seed=trial_seed(run_id, PROPERTY, i),
            probe_argv=("python3", "probe.py"),
            tree_digest="t",
            fixture_path="f.json",
            fixture_digest="f",
            deadline_s=2.0,
            clock=ClockSpec(frozen_at=FROZEN_AT),
            image_id=IMAGE,
        )
        for i in range(rule.trials)
    ]


@dataclass(frozen=True)
class RowResult:
    kind: Kind
    hits: int
    primaries: int
    extra: int  # trials run besides the primaries: replays, tie-breaks, reruns of a caught worker
    summary: CrossCheckSummary


def run_row(
    fleet: FakeFleet, specs: Sequence[TrialSpec], rule: FixedRule, *, share: float, seed: str, escape: float = 0.0
) -> RowResult:
    """The row's primaries on the fleet, then the run's cross-checks and replays (`escape`: the suite's
    `replay_escape`); its kind as the fold gives it."""
    prop = PropertySpec(
        id=PROPERTY,
        band=Band.STATISTICAL,
        fixture="f.json",
        check="checks:rate",
        trials=rule.trials,
        min_hits=rule.min_hits,
    )
    tally = Tally(prop, dispatched=len(specs))
    for obs in fleet.run(specs, None):
        tally.add(obs, judge(prop, obs))
    primaries = fleet.ran
    sent = {spec.key: spec for spec in specs}
    checked = cross_check(fleet, [tally], sent, None, judge, share=share, seed=seed, escape=escape)  # type: ignore[arg-type]
    counts = OutcomeCounts.of(tally.outcomes)
    return RowResult(
        kind_of(counts, Band.STATISTICAL, rule), counts.hit, primaries, fleet.ran - primaries, checked.summary
    )
