"""Fixtures for tests against a real Docker engine (client, image, tiny trees and in-memory inputs) and a
headless Chromium."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import docker
import pytest
from filelock import FileLock, Timeout
from gate_runs import ExampleRuns
from run_containers import containers_of
from support.browser import start_chromium
from support.paths import WINDOWS
from support.servers import RedisServer, Workers

from gate.core.errors import HarnessError, SandboxError
from gate.core.suite.sandbox import Inputs
from gate.core.suite.trial import ClockSpec, Interpreter, Limits, Observation, TrialSpec
from gate.core.testing import make_spec
from gate.io.snapshot import world_readable
from worker.host.engine import DEFAULT_IMAGE, resolve_image_id
from worker.host.engine import docker_client as connect
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import sweep, sweep_dead_workers

FROZEN_AT = datetime(2026, 3, 1, tzinfo=UTC)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test marked `kinds` asserts the verdict kinds of real gate runs: it runs once as a user's run goes by
    # default (overlay work copies, a fresh interpreter per trial) and once with the other value of both
    # (copied work dirs, warm interpreters), so CI shows each mode gives the same kinds. Paired that way, not
    # crossed: the work copy is laid out on the host and the interpreter started inside the container, and
    # neither looks at the other (the sandbox tests cross them: tests/integration/worker_host/test_hostile.py).
    if metafunc.definition.get_closest_marker("kinds"):
        metafunc.parametrize("gate_modes", ["default", "copy+warm"], indirect=True)


@pytest.fixture(autouse=True)
def gate_modes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The modes of the gate runs a `kinds` test starts: `default`, or `copy+warm` (their environment's
    PROBEGATE_WORK_COPY=copy and PROBEGATE_INTERPRETER=warm)."""
    mode = getattr(request, "param", "default")
    if mode == "copy+warm":
        monkeypatch.setenv("PROBEGATE_WORK_COPY", "copy")
        monkeypatch.setenv("PROBEGATE_INTERPRETER", "warm")
    return mode


def _unavailable(reason: str) -> NoReturn:
    # CI must prove the sandbox; a laptop without Docker may skip it.
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


# Machine-wide test locks: shared by the xdist workers of one pytest run and by pytest runs side by side.
LOCKS = Path(tempfile.gettempdir()) / "probegate-test-locks"
_held: dict[str, FileLock] = {}


@contextlib.contextmanager
def machine_lock(name: str, timeout: float = 900) -> Iterator[None]:
    """Hold the lock `name` for the block against every test process on this machine (reentrant within one)."""
    LOCKS.mkdir(exist_ok=True)
    lock = _held.setdefault(name, FileLock(LOCKS / f"{name}.lock"))
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        pytest.fail(f"waited {timeout} s for the machine-wide test lock {name} ({lock.lock_file})")
    try:
        yield
    finally:
        lock.release()


@pytest.fixture
def project_image_builds() -> Iterator[None]:
    """Held by a test that builds project images: each build ends by pruning the dangling build stages of
    every project image on the engine (worker/host/images.py), which would remove the first stage of a lock
    build running alongside before its second stage copies from it."""
    with machine_lock("project-image-builds"):
        yield


WINDOWS_SUITE = WINDOWS / "repo" / "gate.toml"


@pytest.fixture(scope="session")
def windows_project_image(sandbox_image: str) -> str:
    """The windows example's project image (from its hashed lock), built once on this machine before any
    test runs the example: its runs then find it, instead of several building it at once."""
    with machine_lock("project-image-builds"):
        done = subprocess.run(
            [sys.executable, "-m", "gate.cli", "image", "build", "--suite", str(WINDOWS_SUITE)],
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="session")
def example_runs(tmp_path_factory: pytest.TempPathFactory, worker_id: str, sandbox_image: str) -> ExampleRuns:
    """The invoice example's patch runs, made once per pytest session and shared by its xdist workers."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's base is popen-gwN inside the session's own folder, which they share.
    return ExampleRuns((base if worker_id == "master" else base.parent) / "example-runs")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A pinged client for the local engine (skip without one, fail under CI=true)."""
    try:
        client = connect()
    except SandboxError as exc:
        _unavailable(str(exc))
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    """The sandbox image ID (skip when it is not built, fail under CI=true)."""
    try:
        return resolve_image_id(docker_client, DEFAULT_IMAGE)
    except SandboxError as exc:
        _unavailable(str(exc))


@pytest.fixture
def work_copy() -> str | None:
    """The work copy mode the `sandbox` fixture asks for; None: the default (PROBEGATE_WORK_COPY, else
    overlay). Modules that must prove both modes override it with params ["overlay", "copy"]."""
    return None


@pytest.fixture
def interpreter() -> str:
    """The interpreter mode `make_trial` gives its specs; modules that must prove both modes override it."""
    return "fresh"


@pytest.fixture
def timings() -> bool:
    """Whether the `sandbox` fixture asks the supervisor where each trial's time went (a report's `steps_s`);
    a test that reads the split parametrizes it to True."""
    return False


@pytest.fixture
def sandbox(
    docker_client: docker.DockerClient, sandbox_image: str, work_copy: str | None, timings: bool
) -> DockerSandbox:
    return DockerSandbox(client=docker_client, worker_id="pytest", work_copy=work_copy, timings=timings)


def check_mode(obs: Observation, work_copy: str | None) -> None:
    """Fail unless a trial asked for `work_copy` ran in it; a host that cannot give overlay mode skips
    (fails under CI=true, which must prove both modes)."""
    if work_copy is None or obs.fault is not None or obs.work_copy == work_copy:
        return
    if work_copy == "overlay" and obs.work_copy == "copy":
        _unavailable(f"overlay work copies fell back to copy here: {obs.work_copy_note}")
    pytest.fail(f"asked for {work_copy} work copies, the trial ran in {obs.work_copy}")


def check_interpreter(spec: TrialSpec, obs: Observation) -> None:
    """Fail unless a trial that ran says it ran in the interpreter mode its spec asked for."""
    assert obs.fault is not None or obs.interpreter is spec.interpreter, (spec.interpreter, obs.interpreter)


@pytest.fixture
def run_batch(sandbox: DockerSandbox, work_copy: str | None) -> Callable[[list[TrialSpec], Inputs], list[Observation]]:
    """sandbox.run_batch, failing the test when a trial ran in another mode than `work_copy` asked for."""

    def run(specs: list[TrialSpec], inputs: Inputs) -> list[Observation]:
        observed = sandbox.run_batch(specs, inputs)
        for spec, obs in zip(specs, observed, strict=True):
            check_mode(obs, work_copy)
            check_interpreter(spec, obs)
        return observed

    return run


@pytest.fixture
def run_id(docker_client: docker.DockerClient) -> Iterator[str]:
    """A fresh run id; its containers are swept afterwards whatever the test did."""
    rid = f"test-{uuid.uuid4().hex[:12]}"
    yield rid
    sweep(docker_client, rid)


@pytest.fixture
def observe(sandbox: DockerSandbox, work_copy: str | None) -> Callable[[TrialSpec, Inputs], Observation]:
    """Run one trial and return its observation, failing the test on a harness fault or on a mode
    other than the one `work_copy` asked for."""

    def run(spec: TrialSpec, inputs: Inputs) -> Observation:
        [obs] = sandbox.run_batch([spec], inputs)
        assert obs.fault is None, obs.fault
        check_mode(obs, work_copy)
        check_interpreter(spec, obs)
        return obs

    return run


@pytest.fixture
def leftovers(docker_client: docker.DockerClient, run_id: str) -> Callable[[], list]:
    """The containers still labelled with this test's run id."""
    return containers_of(docker_client, run_id)


@dataclass
class MemoryInputs:
    """A test-local Inputs: trees are directories on disk, fixtures are bytes in a dict."""

    trees: dict[str, Path] = field(default_factory=dict)
    fixtures: dict[str, bytes] = field(default_factory=dict)

    def add_tree(self, path: Path) -> str:
        digest = hashlib.sha256(str(path).encode()).hexdigest()
        self.trees[digest] = path
        return digest

    def add_fixture(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self.fixtures[digest] = data
        return digest

    def tree_dir(self, digest: str) -> Path:
        return self.trees[digest]

    def fixture_bytes(self, digest: str) -> bytes:
        data = self.fixtures[digest]
        if hashlib.sha256(data).hexdigest() != digest:
            raise HarnessError(f"fixture {digest} does not match its digest")
        return data


def build_tree(root: Path, probe_source: str, extra: dict[str, str] | None = None) -> Path:
    """A tiny patched tree under `root`: probe.py plus any extra files (relative path → text)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "probe.py").write_text(textwrap.dedent(probe_source))
    for rel, text in (extra or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    world_readable(root)  # as a run's snapshot is made (and, as root, given to the sandbox's uid)
    return root


MakeTrial = Callable[..., tuple[TrialSpec, MemoryInputs]]


@pytest.fixture
def make_trial(tmp_path: Path, run_id: str, interpreter: str) -> MakeTrial:
    """Build a tree with the given probe source and return (spec, inputs) for one trial of it."""
    counter = iter(range(10_000))

    def make(
        probe_source: str,
        *,
        fixture: bytes = b"{}",
        extra: dict[str, str] | None = None,
        deadline_s: float = 10.0,
        limits: Limits | None = None,
        zone: str = "UTC",
        trial_index: int = 0,
        inputs: MemoryInputs | None = None,
    ) -> tuple[TrialSpec, MemoryInputs]:
        inputs = inputs or MemoryInputs()
        tree = build_tree(tmp_path / f"tree-{next(counter)}", probe_source, extra)
        spec = make_spec(
            trial_index,
            run_id=run_id,
            property_id="prop.sandbox",
            tree_digest=inputs.add_tree(tree),
            fixture_path="fixtures/input.json",
            fixture_digest=inputs.add_fixture(fixture),
            deadline_s=deadline_s,
            clock=ClockSpec(frozen_at=FROZEN_AT, zone=zone),
            limits=limits or Limits(),
            interpreter=Interpreter(interpreter),
        )
        return spec, inputs

    return make


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server on a free loopback port (skip without one, fail under CI=true)."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def workers(redis_server: RedisServer, tmp_path: Path, docker_client, sandbox_image: str) -> Iterator[Workers]:
    """Gate-worker processes on a private broker; short visibility timeout so a lost batch is redelivered fast."""
    pool = Workers(redis_server.url, tmp_path, env={"PROBEGATE_VISIBILITY_TIMEOUT": "8"})
    yield pool
    pool.stop_all()
    sweep_dead_workers(docker_client)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium WebDriver on the system browser and driver (skip without them, fail under CI=true)."""
    driver = start_chromium(_unavailable)
    try:
        yield driver
    finally:
        driver.quit()
