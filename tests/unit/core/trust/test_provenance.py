"""gate.core.trust.provenance: a trial counts only if it ran in the run's own image with its spec's seed; one
a worker ran elsewhere (another image, or no sandbox at all) or with a seed of its own is a fault that can
neither pass a row nor draw a credit."""

from __future__ import annotations

from gate.core.suite.trial import FaultOrigin, Observation
from gate.core.testing import make_spec
from gate.core.trust.provenance import in_run_image, with_spec_seed

RUN_IMAGE = "sha256:" + "a" * 64


def test_a_trial_in_the_runs_image_counts_as_it_is() -> None:
    """The run's image: the observation is untouched."""
    spec = make_spec(image_id=RUN_IMAGE)
    obs = Observation.of(spec, exit_code=0, image_id=RUN_IMAGE)
    assert in_run_image(spec, obs) == (obs, False)


def test_a_stub_sandbox_pass_becomes_an_unproven_fault() -> None:
    """`gate-worker --sandbox stub` reports a clean exit in image "stub": a fault of unknown origin instead."""
    spec = make_spec(image_id=RUN_IMAGE)
    obs = Observation.of(spec, exit_code=0, image_id="stub", worker_id="liar")
    replaced, changed = in_run_image(spec, obs)
    assert changed
    assert replaced.fault is not None and "not the run's image" in replaced.fault
    assert replaced.fault_origin is FaultOrigin.UNKNOWN  # never a harness credit
    assert replaced.exit_code is None or replaced.exit_code != 0 or replaced.fault is not None
    assert replaced.worker_id == "liar"


def test_another_real_image_is_refused_too() -> None:
    """Any image but the run's, and a report of none at all."""
    spec = make_spec(image_id=RUN_IMAGE)
    for other in ("sha256:" + "b" * 64, ""):
        replaced, changed = in_run_image(spec, Observation.of(spec, exit_code=0, image_id=other))
        assert changed and replaced.fault is not None


def test_a_spec_naming_no_image_checks_nothing() -> None:
    """Before the image is known (a spec with no image id), there is nothing to compare against."""
    spec = make_spec()
    obs = Observation.of(spec, exit_code=0, image_id="stub")
    assert in_run_image(spec, obs) == (obs, False)


def test_a_trial_with_its_specs_seed_counts_as_it_is() -> None:
    """The spec's seed: the observation is untouched."""
    spec = make_spec(3)
    obs = Observation.of(spec, exit_code=0)
    assert with_spec_seed(spec, obs) == (obs, False)


def test_a_seed_the_worker_chose_becomes_an_unproven_fault() -> None:
    """Another seed, or none reported, is a fault of unknown origin naming both seeds and the worker."""
    spec = make_spec(3)
    for other, said in ((spec.seed + 1, f"seed {spec.seed + 1}"), (None, "no seed")):
        obs = Observation.of(spec, exit_code=0, seed=other, worker_id="chooser")
        replaced, changed = with_spec_seed(spec, obs)
        assert changed and replaced.fault == f"ran with {said}, not the trial's seed {spec.seed}"
        assert replaced.fault_origin is FaultOrigin.UNKNOWN and replaced.worker_id == "chooser"


def test_a_fault_is_kept_whatever_seed_it_names() -> None:
    """A fault observed nothing: it is kept as the worker reported it."""
    spec = make_spec(3)
    fault = Observation.harness_fault(spec, "lost", origin=FaultOrigin.HARNESS).model_copy(update={"seed": None})
    assert with_spec_seed(spec, fault) == (fault, False)
