"""Which trials may travel and run together: the one batching rule, used by the planner's callers (the
local pool, the Celery dispatch), the wire format and the sandbox. Pure.

A batch holds trials that differ only in their index, their seed and their canary (one secret per
trial, never shared): same run, property, tree, fixture, probe, deadline, clock, limits and image. So
a batch crosses the broker as one spec plus indices, seeds and canaries, and fits one container: every
field a container is fixed to (run, tree, clock, limits, image) is part of the key.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.core.suite.trial import TrialSpec

PER_TRIAL = ("trial_index", "seed", "canary")  # the only fields trials of one batch may differ in


def batch_key(spec: TrialSpec) -> tuple[object, ...]:
    """Everything a batch's trials share: every field of the spec but its index, seed and canary."""
    return tuple(getattr(spec, name) for name in TrialSpec.model_fields if name not in PER_TRIAL)


def batches(specs: Sequence[TrialSpec], size: int) -> list[list[TrialSpec]]:
    """Specs grouped by batch key (in practice: by property), in chunks of at most `size`, in order."""
    groups: dict[tuple[object, ...], list[TrialSpec]] = {}
    for spec in specs:
        groups.setdefault(batch_key(spec), []).append(spec)
    return [items[i : i + size] for items in groups.values() for i in range(0, len(items), size)]


def check_one_batch(specs: Sequence[TrialSpec]) -> None:
    """ValueError unless every spec shares the first one's batch key (what the wire refuses to mix)."""
    key = batch_key(specs[0])
    for spec in specs:
        if batch_key(spec) != key:
            raise ValueError(f"batch mixes trials of different shape ({spec.property_id})")
