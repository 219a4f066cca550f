"""What an observation must show about where it came from before it counts: the trial ran in the run's
own image, with the seed the coordinator chose for it. A worker reports the image it ran in; one that ran
elsewhere (another image, or none at all: `gate-worker --sandbox stub`) saw nothing of the patch in the
sandbox the card names, so its observation is a fault nobody has shown to be outside the patch: it can
neither pass a row nor draw a credit. So is one run with another seed than the spec's: the worker, not
the coordinator, chose that trial's draw."""

from __future__ import annotations

from gate.core.suite.trial import FaultOrigin, Observation, TrialSpec


def in_run_image(spec: TrialSpec, obs: Observation) -> tuple[Observation, bool]:
    """`obs`, or (when the spec names the run's image and the trial reported running in another) a fault
    in its place; True when it was replaced. Faults are kept as they are: they observed nothing."""
    if not spec.image_id or obs.fault is not None or obs.image_id == spec.image_id:
        return obs, False
    ran_in = obs.image_id[:19] or "no image"
    detail = f"ran in {ran_in}, not the run's image {spec.image_id[:19]}"
    fault = Observation.harness_fault(
        spec, detail, origin=FaultOrigin.UNKNOWN, worker_id=obs.worker_id, image_id=obs.image_id
    )
    return fault, True


def with_spec_seed(spec: TrialSpec, obs: Observation) -> tuple[Observation, bool]:
    """`obs`, or (when the trial reported another seed than its spec's, or none) a fault in its place;
    True when it was replaced. Faults are kept as they are: they observed nothing."""
    if obs.fault is not None or obs.seed == spec.seed:
        return obs, False
    ran_with = "no seed" if obs.seed is None else f"seed {obs.seed}"
    detail = f"ran with {ran_with}, not the trial's seed {spec.seed}"
    fault = Observation.harness_fault(
        spec, detail, origin=FaultOrigin.UNKNOWN, worker_id=obs.worker_id, image_id=obs.image_id
    )
    return fault, True
