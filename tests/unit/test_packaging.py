"""What travels in the wheel and how it is versioned: the sandbox image's definition as package data,
one version everywhere, a worker of another version refused, and the workflow `gate init` writes
installing a pinned wheel by hash."""

from __future__ import annotations

from importlib import metadata

import pytest
from support.imagedef import definition_tag

import gate
from gate.cli.init import render
from gate.cli.main import main
from gate.core.errors import RET_OK
from gate.core.suite.trial import FaultOrigin, Observation
from worker.celery.shared.wire import encode_batch, version_refusal
from worker.celery.worker import cli as worker_cli
from worker.celery.worker.settings import PoolSettings, configure
from worker.host.engine import DEFAULT_IMAGE
from worker.host.imagesetup import definition_dir, definition_problems

# The configuration both recipes give the image (as `docker image inspect` shows it).
AS_DEFINED = {
    "Config": {
        "User": "65534:65534",
        "Env": ["FAKETIME_DONT_FAKE_MONOTONIC=1", "PYTHONDONTWRITEBYTECODE=1", "PATH=/usr/bin:/bin"],
        "Cmd": ["python3"],
    }
}


def test_the_image_definition_is_package_data_naming_the_default_tag() -> None:
    """The Dockerfile, the offline script and TAG are found through the package, and TAG is DEFAULT_IMAGE."""
    with definition_dir() as folder:
        assert {"Dockerfile", "build-offline.sh", "TAG"} <= {path.name for path in folder.iterdir()}
    assert definition_tag() == DEFAULT_IMAGE


def test_an_image_as_defined_has_no_problems() -> None:
    """The configuration the definition sets matches it."""
    assert definition_problems(AS_DEFINED) == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"User": ""}, "runs as root"),
        ({"Env": ["PYTHONDONTWRITEBYTECODE=1"]}, "FAKETIME_DONT_FAKE_MONOTONIC=1"),
        ({"Cmd": ["bash"]}, "command"),
    ],
)
def test_an_image_unlike_its_definition_is_named(change: dict, named: str) -> None:
    """Another user, a missing faketime setting or another command is each a problem naming it."""
    attrs = {"Config": {**AS_DEFINED["Config"], **change}}
    assert any(named in problem for problem in definition_problems(attrs))


def test_the_version_is_written_once() -> None:
    """The installed metadata's version is gate.__version__ (the build reads it from there)."""
    assert metadata.version("probegate") == gate.__version__


def test_gate_and_gate_worker_print_the_version(capsys) -> None:
    """`gate --version` and `gate-worker --version` both print the one version."""
    assert main(["--version"]) == RET_OK
    assert capsys.readouterr().out.strip() == f"gate {gate.__version__}"
    with pytest.raises(SystemExit) as done:
        worker_cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"gate-worker (probegate) {gate.__version__}"


def test_a_batch_from_another_version_is_refused_naming_both(make_specs) -> None:
    """A batch carries the coordinator's version; a worker of another one refuses it in one line naming both."""
    payload = encode_batch(make_specs(2, run_id="r"))
    assert version_refusal(payload) is None
    refusal = version_refusal({**payload, "version": "0.0.9"})
    assert refusal is not None and "\n" not in refusal
    assert f"probegate {gate.__version__}" in refusal and "probegate 0.0.9" in refusal


@pytest.mark.parametrize("theirs", ["0.0.9", None])
def test_a_result_from_a_worker_of_another_version_is_refused_naming_both(make_specs, theirs) -> None:
    """Adversarial: a result whose worker runs another probegate (or too old a one to say) counts for
    nothing: every trial is a harness fault of unknown origin naming both versions, and a harness event."""
    from worker.celery.coordinator.answers import Answers
    from worker.celery.shared.wire import encode_observations

    specs = make_specs(2, run_id="r")
    passing = [Observation.of(s, exit_code=0, duration_s=0.1) for s in specs]
    result = {"observations": encode_observations(passing), "worker": "w9", "redelivered": False}
    events: list = []
    meta = {"status": "SUCCESS", "result": result if theirs is None else {**result, "version": theirs}}
    got = list(Answers(events).observations(specs, meta, "t1", None, None))
    assert [o.fault is not None and o.fault_origin is FaultOrigin.UNKNOWN for o in got] == [True, True]
    assert (
        f"probegate {theirs or 'older than 0.2.0'}" in got[0].fault and f"probegate {gate.__version__}" in got[0].fault
    )
    assert [e.kind for e in events] == ["worker_version"]
    current = {"status": "SUCCESS", "result": {**result, "version": gate.__version__}}
    assert [o.fault for o in Answers([]).observations(specs, current, "t2", None, None)] == [None, None]


@pytest.fixture
def make_specs():
    from gate.core.testing import make_spec

    def specs(count: int, run_id: str) -> list:
        return [make_spec(run_id=run_id, trial_index=i) for i in range(count)]

    return specs


def test_the_workflow_installs_a_wheel_pinned_by_hash_and_sets_it_up() -> None:
    """Every job installs the wheel at PROBEGATE_WHEEL_URL only if it hashes to PROBEGATE_WHEEL_SHA256
    (--require-hashes), clones nothing, and builds the sandbox image with `gate setup`."""
    text = render("repo")[".github/workflows/probegate.yml"].decode()
    jobs = text.count("runs-on:")
    assert jobs == 3
    assert text.count('pip" download --quiet --no-deps --require-hashes') == jobs
    assert text.count('bin/gate" setup') == jobs
    assert text.count("--hash=sha256:%s") == jobs and "${{ vars.PROBEGATE_WHEEL_SHA256 }}" in text
    assert "git clone" not in text and "docker build" not in text and "PROBEGATE_GIT" not in text


def test_the_pull_request_job_runs_the_doctor_on_its_base_before_the_run() -> None:
    """The pull request's job checks the machine with `gate doctor --base "$BASE"` before `gate run`."""
    text = render("repo")[".github/workflows/probegate.yml"].decode()
    assert text.index('"$GATE" doctor --base "$BASE"') < text.index("- name: gate run")


def test_the_worker_task_refuses_another_versions_batch_before_running_anything(make_specs, tmp_path, monkeypatch):
    """run_batch answers a batch of another version with one harness fault per trial naming both
    versions (signed like any result), without touching a sandbox."""
    from worker.celery.shared.wire import decode_observations
    from worker.celery.worker import signing, tasks

    configure(PoolSettings.from_env({signing.ENV_KEY: str(tmp_path / "worker.key")}))
    monkeypatch.setattr(signing, "_key", None)
    monkeypatch.setattr(tasks, "sandbox", lambda: pytest.fail("the sandbox was asked for"))
    batch = {**encode_batch(make_specs(3, run_id="r")), "version": "0.0.9"}
    result = tasks.run_batch.apply(args=[batch]).get()
    observed = decode_observations(result["observations"])
    assert [o.trial_index for o in observed] == [0, 1, 2]
    assert all(o.fault == version_refusal(batch) for o in observed) and result["signature"]
