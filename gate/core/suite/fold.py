"""The fold: observations in, one verdict per property out. Checks run here, on the coordinator,
so the patch never reaches the oracle. A trial key counts once; a duplicate is a harness event.

A `Tally` is what has been seen of one property so far; the wave loop (`gate.run.waves`) feeds it and
asks it how many more trials the band rule wants, and `fold_tallies` turns tallies into verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gate.core.suite.suite import PropertySpec
from gate.core.suite.trial import Observation
from gate.core.verdicts.verdict import Band, Outcome, OutcomeKind, Verdict, fold, harness_verdict

Judge = Callable[[PropertySpec, Observation], Outcome]


@dataclass
class Tally:
    """One property's dispatched trial count, observations and judged outcomes, in arrival order."""

    prop: PropertySpec
    dispatched: int = 0
    observations: list[Observation] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)

    def add(self, obs: Observation, outcome: Outcome) -> None:
        self.observations.append(obs)
        self.outcomes.append(outcome)

    @property
    def hits(self) -> int:
        return sum(1 for o in self.outcomes if o.kind is OutcomeKind.HIT)

    def more(self) -> int:
        """How many trials to dispatch next: the band rule's next wave, 0 once decided or broken."""
        rule = self.prop.rule()
        if rule is None:
            return self.prop.planned_trials() - self.dispatched
        if len(self.outcomes) < self.dispatched:
            return 0  # a trial never reported; the fold will say so
        # A fault or a timeout already fixes the verdict; more trials cannot change it.
        if any(o.kind in (OutcomeKind.FAULT, OutcomeKind.TIMEOUT) for o in self.outcomes):
            return 0
        return rule.next_wave(hits=self.hits, trials=len(self.outcomes))


@dataclass(frozen=True)
class Folded:
    verdicts: tuple[Verdict, ...]
    durations: Mapping[str, tuple[float, ...]]


def fold_tallies(tallies: Sequence[Tally], manifest: Mapping[str, str], *, calibrated: frozenset[str]) -> Folded:
    """Each property's verdict from its tally, in suite order; trials that never reported are a fault.

    `timeout_is_safety` promotes a timeout only on a calibrated deadline: a deadline picked by hand
    cannot turn a slow run into a safety failure."""
    verdicts: list[Verdict] = []
    durations: dict[str, tuple[float, ...]] = {}
    for tally in tallies:
        prop = tally.prop
        digest = manifest[prop.fixture]
        ordered = sorted(zip(tally.observations, tally.outcomes, strict=True), key=lambda pair: pair[0].trial_index)
        durations[prop.id] = tuple(round(obs.duration_s, 4) for obs, _ in ordered)
        missing = tally.dispatched - len(ordered)
        if missing > 0:
            # Executors report a lost batch as faults; a trial missing even so is not proven to be the harness's.
            lost = f"{missing} trial(s) never reported"
            verdicts.append(harness_verdict(prop.id, prop.band, digest, lost, creditable=False))
            continue
        verdicts.append(
            fold(
                property_id=prop.id,
                band=prop.band,
                fixture_digest=digest,
                outcomes=[outcome for _, outcome in ordered],
                rule=prop.rule() if prop.band is Band.STATISTICAL else None,
                timeout_is_safety=prop.timeout_is_safety and prop.id in calibrated,
            )
        )
    return Folded(verdicts=tuple(verdicts), durations=durations)
