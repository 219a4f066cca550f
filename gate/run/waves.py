"""Dispatch in waves: every property's first wave goes out at once; after each wave, undecided
statistical properties (a sequential rule that has not crossed a boundary) get their next wave,
and decided ones get nothing more. A fixed-N property is one wave. Works through any executor.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.core.card import HarnessEvent
from gate.core.fold import Judge, Tally
from gate.core.plan import Planner
from gate.core.suite import PropertySpec
from gate.core.trial import TrialSpec
from gate.io.snapshot import LocalInputs
from gate.run.executor import Executor
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
) -> list[Tally]:
    """Run the suite's trials wave by wave; returns one tally per property, in suite order.
    `progress` hears each property's planned total as waves are planned, each judged trial, and the end."""
    try:
        return _waves(
            executor, properties, planner=planner, inputs=inputs, judge=judge, events=events, progress=progress
        )
    finally:
        progress.finished()


def _waves(
    executor: Executor,
    properties: Sequence[PropertySpec],
    *,
    planner: Planner,
    inputs: LocalInputs,
    judge: Judge,
    events: list[HarnessEvent],
    progress: Progress,
) -> list[Tally]:
    tallies = [Tally(prop) for prop in properties]
    by_id = {t.prop.id: t for t in tallies}
    seen: set[tuple[str, str, int]] = set()
    wave = _next_wave(tallies, planner, progress)
    while wave:
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
            if tally is None or obs.trial_index >= tally.dispatched:
                events.append(
                    HarnessEvent(
                        kind="stray_result",
                        property_id=obs.property_id,
                        detail=f"trial {obs.trial_index} was never dispatched; ignored",
                    )
                )
                continue
            outcome = judge(tally.prop, obs)
            tally.add(obs, outcome)
            progress.done(tally.prop.id, outcome.kind)
        wave = _next_wave(tallies, planner, progress)
    return tallies


def _next_wave(tallies: Sequence[Tally], planner: Planner, progress: Progress) -> list[TrialSpec]:
    wave: list[TrialSpec] = []
    for tally in tallies:
        count = tally.more()
        if count > 0:
            wave.extend(planner.trials(tally.prop, tally.dispatched, count))
            tally.dispatched += count
            progress.planned(tally.prop.id, tally.dispatched)
    return wave
