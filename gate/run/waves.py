"""Dispatch in waves: every property's first wave goes out at once; after each wave, undecided
statistical properties (a sequential rule that has not crossed a boundary) get their next wave,
and decided ones get nothing more. A fixed-N property is one wave. Works through any executor.
A paired property's wave sends each trial index twice, on the patched tree and on the base tree (same
seed, fixture and clock), in the same wave; each answer counts only for the side its key names.
Before a check sees an observation, the coordinator searches its stream heads for the trial's canary
itself: a worker's `canary_seen` is a claim, the bytes it returned are evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.core.card.card import HarnessEvent
from gate.core.suite.fold import Judge, Tally
from gate.core.suite.plan import Planner
from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import Observation, Side, TrialKey, TrialSpec
from gate.core.trust.crosscheck import with_coordinator_canary
from gate.core.trust.provenance import in_run_image, with_spec_seed
from gate.io.snapshot import LocalInputs
from gate.run.executors.base import Executor
from gate.run.progress import NO_PROGRESS, Progress


def run_waves(
    executor: Executor,
    properties: Sequence[PropertySpec],
    *,
    planner: Planner,
    inputs: LocalInputs,
    judge: Judge,
    events: list[HarnessEvent],
    progress: Progress = NO_PROGRESS,
    sent: dict[TrialKey, TrialSpec] | None = None,
    base_planner: Planner | None = None,
) -> list[Tally]:
    """Run the suite's trials wave by wave; returns one tally per property, in suite order.
    `progress` hears each property's planned total as waves are planned, each judged trial, and the end;
    `sent`, when given, receives every dispatched spec by key (a cross-check sends the same spec again);
    `base_planner` plans the base tree's side of paired properties (`inputs` must serve that tree too)."""
    try:
        return _waves(
            executor,
            properties,
            planner=planner,
            base_planner=base_planner,
            inputs=inputs,
            judge=judge,
            events=events,
            progress=progress,
            sent={} if sent is None else sent,
        )
    finally:
        progress.finished()


def _waves(
    executor: Executor,
    properties: Sequence[PropertySpec],
    *,
    planner: Planner,
    base_planner: Planner | None,
    inputs: LocalInputs,
    judge: Judge,
    events: list[HarnessEvent],
    progress: Progress,
    sent: dict[TrialKey, TrialSpec],
) -> list[Tally]:
    tallies = [Tally(prop) for prop in properties]
    by_id = {t.prop.id: t for t in tallies}
    seen: set[TrialKey] = set()
    wave = _next_wave(tallies, planner, base_planner, progress)
    while wave:
        sent.update((spec.key, spec) for spec in wave)
        for obs in executor.run(wave, inputs):
            if obs.key in seen:
                events.append(
                    HarnessEvent(
                        kind="duplicate_result",
                        property_id=obs.property_id,
                        detail=f"trial {obs.trial_index} reported twice; first result kept",
                    )
                )
                continue
            seen.add(obs.key)
            tally = by_id.get(obs.property_id)
            # Only a dispatched key counts: a base-side answer for a property that ran no base side, or an
            # answer whose side differs from its spec's, names a trial nobody sent.
            if tally is None or obs.trial_index >= tally.dispatched or obs.key not in sent:
                side = "base trial" if obs.side is Side.BASE else "trial"
                events.append(
                    HarnessEvent(
                        kind="stray_result",
                        property_id=obs.property_id,
                        detail=f"{side} {obs.trial_index} was never dispatched; ignored",
                    )
                )
                continue
            obs = coordinator_canary(sent[obs.key], obs, events)
            outcome = judge(tally.prop, obs)
            if obs.side is Side.BASE:
                tally.add_base(obs, outcome)
            else:
                tally.add(obs, outcome)
            progress.done(tally.prop.id, outcome.kind, obs.trial_index, obs.side)
        wave = _next_wave(tallies, planner, base_planner, progress)
    return tallies


def _next_wave(
    tallies: Sequence[Tally], planner: Planner, base_planner: Planner | None, progress: Progress
) -> list[TrialSpec]:
    wave: list[TrialSpec] = []
    for tally in tallies:
        count = tally.more()
        if count <= 0:
            continue
        specs = planner.trials(tally.prop, tally.dispatched, count)
        if tally.paired and base_planner is not None:
            # Index by index, base beside patch: an executor that starts them in order starts both alike.
            based = base_planner.trials(tally.prop, tally.dispatched, count)
            specs = [spec for pair in zip(based, specs, strict=True) for spec in pair]
        wave.extend(specs)
        tally.dispatched += count
        progress.planned(tally.prop.id, tally.dispatched * (2 if tally.paired and base_planner else 1))
    return wave


def coordinator_canary(spec: TrialSpec, obs: Observation, events: list[HarnessEvent]) -> Observation:
    """`obs` as the coordinator checks it itself: run in the run's image with the trial's seed (else a
    fault, and an event naming the worker), and its own canary search applied (a worker that hid a leak
    is named)."""
    obs, elsewhere = in_run_image(spec, obs)
    worker = obs.worker_id or "the worker"
    if elsewhere:
        events.append(_event("wrong_image", obs, f"on {worker}: {obs.fault}"))
    obs, reseeded = with_spec_seed(spec, obs)
    if reseeded:
        events.append(_event("wrong_seed", obs, f"on {worker}: {obs.fault}"))
    obs, hidden = with_coordinator_canary(spec, obs)
    if hidden:
        events.append(
            _event("canary_hidden", obs, f"the canary is in the stream heads {worker} returned, which reported none")
        )
    return obs


def _event(kind: str, obs: Observation, detail: str) -> HarnessEvent:
    return HarnessEvent(kind=kind, property_id=obs.property_id, detail=f"trial {obs.trial_index}: {detail}")
