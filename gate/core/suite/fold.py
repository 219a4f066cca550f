"""The fold: observations in, one verdict per property out. Checks run here, on the coordinator,
so the patch never reaches the oracle. A trial key counts once; a duplicate is a harness event.

A `Tally` is what has been seen of one property so far; the wave loop (`gate.run.waves`) feeds it and
asks it how many more trials the band rule wants, and `fold_tallies` turns tallies into verdicts.

A paired property (`rule = "paired"`) runs each dispatched trial index twice, on the patched tree and on
the base tree: `more()` then counts pairs, the wave loop dispatches that many indices on both trees and
feeds the base's judged trials to `add_base`, and the fold decides on the pairs (`gate.core.verdicts.pairfold`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import Observation, Side
from gate.core.verdicts.paired import PairCounts, PairedRule
from gate.core.verdicts.pairfold import fold_paired, pair_up
from gate.core.verdicts.verdict import Band, Outcome, OutcomeKind, PairedEvidence, Verdict, fold, harness_verdict

Judge = Callable[[PropertySpec, Observation], Outcome]


@dataclass
class Tally:
    """One property's dispatched trial count, observations and judged outcomes, in arrival order; for a
    paired property also the base tree's, of the same dispatched indices."""

    prop: PropertySpec
    dispatched: int = 0
    observations: list[Observation] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    base_observations: list[Observation] = field(default_factory=list)
    base_outcomes: list[Outcome] = field(default_factory=list)

    def add(self, obs: Observation, outcome: Outcome) -> None:
        """A trial on the patched tree; a base-side observation is refused (it would count for the patch)."""
        if obs.side is not Side.PATCH:
            raise ValueError(f"{obs.property_id} trial {obs.trial_index} is a {obs.side} trial, not the patch's")
        self.observations.append(obs)
        self.outcomes.append(outcome)

    def add_base(self, obs: Observation, outcome: Outcome) -> None:
        """A paired property's trial of the same index on the base tree; a patch-side observation, or any
        for a property that is not paired, is refused (it would pair the patch with itself)."""
        if obs.side is not Side.BASE or not self.paired:
            raise ValueError(f"{obs.property_id} trial {obs.trial_index} is not a paired property's base trial")
        self.base_observations.append(obs)
        self.base_outcomes.append(outcome)

    @property
    def paired(self) -> bool:
        return isinstance(self.prop.rule(), PairedRule)

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
        if isinstance(rule, PairedRule):
            # The base's trials of every dispatched index must be in (and unbroken) before the pairs can count.
            if len(self.base_outcomes) < self.dispatched:
                return 0
            if any(o.kind in (OutcomeKind.FAULT, OutcomeKind.TIMEOUT) for o in self.base_outcomes):
                return 0
            return min(rule.next_wave(pair_up(self.base_outcomes, self.outcomes)), rule.max_pairs - self.dispatched)
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
        rule = prop.rule() if prop.band is Band.STATISTICAL else None
        if isinstance(rule, PairedRule):
            missing_base = tally.dispatched - len(tally.base_outcomes)
            if missing > 0 or missing_base > 0:
                lost = f"{missing} patched and {missing_base} base trial(s) never reported (a paired rule runs both)"
                # No pair counts: the row still carries its (empty) paired evidence, as every paired row does.
                empty = PairedEvidence(state=rule.state(PairCounts()))
                lost_verdict = harness_verdict(prop.id, prop.band, digest, lost, creditable=False)
                verdicts.append(lost_verdict.model_copy(update={"paired": empty}))
                continue
            patch = [outcome for _, outcome in ordered]
            verdicts.append(
                fold_paired(
                    property_id=prop.id,
                    fixture_digest=digest,
                    patch=patch,
                    base=sorted(tally.base_outcomes, key=lambda o: o.trial_index),
                    rule=rule,
                    timeout_is_safety=prop.timeout_is_safety and prop.id in calibrated,
                )
            )
            continue
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
                rule=rule,
                timeout_is_safety=prop.timeout_is_safety and prop.id in calibrated,
            )
        )
    return Folded(verdicts=tuple(verdicts), durations=durations)
