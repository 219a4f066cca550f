"""The stub sandbox: by default a clean, empty exit for every trial in its own image, never the run's; with a
script, the script's answers, filled in with what they leave unsaid; a lifecycle that keeps nothing."""

from __future__ import annotations

from pathlib import Path

from gate.core.suite.trial import Captured, FaultOrigin, Limits, Observation
from gate.core.testing import make_spec, make_specs
from gate.core.trust.provenance import in_run_image
from worker.host.sandboxes.stub import STUB_IMAGE, StubSandbox

RUN_IMAGE = "sha256:" + "a" * 64


class Inputs:
    """Fixture bytes named after their digest, and a note of each one read."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def tree_dir(self, digest: str) -> Path:
        return Path("/nonexistent")

    def fixture_bytes(self, digest: str) -> bytes:
        self.read.append(digest)
        return digest.encode()


def test_without_a_script_every_trial_exits_clean_in_the_stub_image() -> None:
    """One clean, empty exit per spec, in order, with the spec's key and seed, the stub's image and worker; no
    input is read (the dispatch benchmark hands it none)."""
    specs = make_specs(3, run_id="r", image_id=RUN_IMAGE)
    observed = StubSandbox(worker_id="w1").run_batch(specs, None)  # type: ignore[arg-type]
    assert [o.key for o in observed] == [s.key for s in specs]
    assert [o.seed for o in observed] == [s.seed for s in specs]
    for obs in observed:
        assert (obs.exit_code, obs.fault, obs.stdout.data, obs.writes) == (0, None, b"", ())
        assert (obs.image_id, obs.worker_id) == (STUB_IMAGE, "w1")


def test_a_stub_answer_never_counts_for_a_run() -> None:
    """Its image is not the run's, so provenance turns its clean exit into a fault of unknown origin."""
    spec = make_spec(image_id=RUN_IMAGE)
    (obs,) = StubSandbox().run_batch([spec], Inputs())
    replaced, changed = in_run_image(spec, obs)
    assert changed and replaced.fault is not None and replaced.fault_origin is FaultOrigin.UNKNOWN


def test_a_script_answers_from_the_fixture_and_what_it_leaves_unsaid_is_filled_in() -> None:
    """The script sees each spec's fixture bytes; an answer naming no image, seed or worker gets the stub's
    image, the spec's seed and the stub's worker, and one naming them keeps its own."""
    inputs = Inputs()

    def script(spec, fixture: bytes) -> Observation:
        if spec.trial_index == 0:
            return Observation(run_id=spec.run_id, property_id=spec.property_id, trial_index=0, exit_code=3)
        stdout = Captured(data=fixture)
        return Observation.of(spec, exit_code=0, image_id="elsewhere", seed=7, worker_id="other", stdout=stdout)

    specs = make_specs(2, fixture_digest="fx")
    quiet, named = StubSandbox(script, image="sha256:mock", worker_id="w1").run_batch(specs, inputs)
    assert inputs.read == ["fx", "fx"]
    assert (quiet.exit_code, quiet.image_id, quiet.seed, quiet.worker_id) == (3, "sha256:mock", specs[0].seed, "w1")
    assert (named.image_id, named.seed, named.worker_id, named.stdout.data) == ("elsewhere", 7, "other", b"fx")


def test_a_scripted_fault_is_kept_as_it_is() -> None:
    spec = make_spec()
    fault = Observation.harness_fault(spec, "no engine", origin=FaultOrigin.HARNESS)
    (obs,) = StubSandbox(lambda s, _: fault).run_batch([spec], Inputs())
    assert obs == fault


def test_the_lifecycle_keeps_and_removes_nothing() -> None:
    """open and prestart do nothing; close and abort report no container removed; the image is its own."""
    stub = StubSandbox(image="img")
    stub.open("r")
    stub.prestart("r", Limits(), 4)
    assert (stub.close("r"), stub.abort("r"), stub.image_id(), stub.image) == (0, 0, "img", "img")
