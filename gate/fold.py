"""The fold: observations in, one verdict per property out. Checks run here, on the coordinator,
so the patch never reaches the oracle. A trial key counts once; a duplicate is a harness event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gate.card import HarnessEvent
from gate.checks import Check, Trial, judge
from gate.suite import PropertySpec
from gate.trial import ClockSpec, Observation
from gate.verdict import Verdict, fold, harness_verdict

TrialKey = tuple[str, str, int]


def collect(stream: Iterable[Observation], events: list[HarnessEvent]) -> dict[TrialKey, Observation]:
    """First result per trial key wins; a duplicate is recorded in `events`, never a second vote."""
    seen: dict[TrialKey, Observation] = {}
    for obs in stream:
        if obs.key in seen:
            events.append(
                HarnessEvent(
                    kind="duplicate_result",
                    property_id=obs.property_id,
                    detail=f"trial {obs.trial_index} reported twice; first result kept",
                )
            )
            continue
        seen[obs.key] = obs
    return seen


@dataclass(frozen=True)
class Folded:
    verdicts: tuple[Verdict, ...]
    durations: Mapping[str, tuple[float, ...]]


def fold_suite(
    properties: Sequence[PropertySpec],
    observed: Mapping[TrialKey, Observation],
    *,
    checks: Mapping[str, Check],
    fixtures: Mapping[str, bytes],
    manifest: Mapping[str, str],
    clock: ClockSpec,
) -> Folded:
    """Judge every observation with its property's check and fold each property to its verdict."""
    by_property: dict[str, list[Observation]] = {}
    for obs in sorted(observed.values(), key=lambda o: o.trial_index):
        by_property.setdefault(obs.property_id, []).append(obs)
    verdicts: list[Verdict] = []
    durations: dict[str, tuple[float, ...]] = {}
    for prop in properties:
        digest = manifest[prop.fixture]
        mine = by_property.get(prop.id, [])
        durations[prop.id] = tuple(round(o.duration_s, 4) for o in mine)
        missing = prop.planned_trials() - len(mine)
        if missing > 0:
            verdicts.append(harness_verdict(prop.id, prop.band, digest, f"{missing} planned trial(s) never reported"))
            continue
        outcomes = [judge(checks[prop.id], Trial(o, fixtures[digest], prop.params, clock), prop.band) for o in mine]
        verdicts.append(
            fold(
                property_id=prop.id,
                band=prop.band,
                fixture_digest=digest,
                outcomes=outcomes,
                rule=prop.rule(),
                timeout_is_safety=prop.timeout_is_safety,
            )
        )
    return Folded(verdicts=tuple(verdicts), durations=durations)
