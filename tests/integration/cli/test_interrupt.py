"""Ctrl-C (and SIGTERM) stops `gate run` within 5 seconds in every phase, exit 130 (143), with every container
it started removed, no card stamped and the books untouched; `gate pool serve` and `gate-worker` stop on
SIGTERM within 5 seconds too, leaving no container. Each test waits for the line or the container that says
the command reached its phase, then signals it.

These run beside other tests on purpose ("whatever ran on the machine before it"): each looks only at the
containers of the process it signalled, a sweep by a neighbour's run changes none of their assertions, and
the bound has room for a loaded machine (20 runs in a row under load: the slowest stop 3.8 s, a gate-worker)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from filelock import FileLock
from run_containers import gone_within, probe_running
from signalled import STOP_WITHIN_S, Signalled, record
from support.paths import INVOICE as EXAMPLE
from test_flakes_docker import FLICKER, suite_repo
from test_init import SLUGIFY, commit_all, repo

from worker.host.sweep import LABEL_HOST, LABEL_PID, LABEL_RUN

pytestmark = pytest.mark.integration

RUN = [sys.executable, "-m", "gate.cli", "--log-level", "debug", "run"]  # debug: the lines that mark phases


def example_suite(folder: Path, *, deadline_s: float = 60.0, image: str = "") -> Path:
    """The invoice example's suite in `folder` with `deadline_s` deadlines (long: without the abort the
    hanging patch would hold the run for minutes) and, when given, a `[suite.image]` section."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (EXAMPLE / "gate.toml").read_text().replace("deadline_s = 5.0", f"deadline_s = {deadline_s}")
    suite = folder / "gate.toml"
    suite.write_text(text.replace("[[property]]", f"{image}\n[[property]]", 1) if image else text)
    for name in ("checks.py", "flake-freeze.json"):
        (folder / name).write_bytes((EXAMPLE / name).read_bytes())
    return suite


def run_cmd(folder: Path, patch: str, *extra: str) -> list[str]:
    """`gate run` of one of the example's patches, its card and fresh books in `folder`."""
    return [
        *RUN,
        *("--suite", str(folder / "gate.toml"), "--workdir", str(EXAMPLE / "patches" / patch)),
        *("--fixture", str(EXAMPLE / "fixtures"), "--seal", str(EXAMPLE / ".fixture-seal")),
        *("--card", str(folder / "card.json"), "--ledger", str(folder / "ledger.json"), "--new-ledger"),
        *extra,
    ]


def labelled(client: docker.DockerClient, pid: int, *, running: bool = False) -> list:
    """Containers the process `pid` started (the label every sandbox container carries)."""
    filters: dict[str, object] = {"label": f"{LABEL_PID}={pid}"}
    if running:
        filters["status"] = "running"
    return client.containers.list(all=not running, filters=filters, sparse=True)


def stopped(cmd: Signalled, client: docker.DockerClient, *, code: int = 130, took: float) -> None:
    """The promise, for `gate run`: exited with `code` within STOP_WITHIN_S, said so in one line (no
    traceback), and no container it started remains."""
    record(os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0], took)
    assert took < STOP_WITHIN_S, f"took {took:.1f}s to stop:\n{cmd.stderr[-3000:]}"
    assert cmd.proc.returncode == code, cmd.stderr[-3000:]
    assert "Traceback" not in cmd.stderr, cmd.stderr
    assert labelled(client, cmd.pid) == [], "containers left behind"


@pytest.fixture
def signalled() -> Iterator[list[Signalled]]:
    """Commands a test started; any still running at the end is killed."""
    started: list[Signalled] = []
    yield started
    for cmd in started:
        cmd.kill()


def test_sigint_while_prestarting_containers(tmp_path: Path, docker_client, sandbox_image: str, signalled) -> None:
    """SIGINT as the run's first container appears (spares still starting, the tree being read)."""
    example_suite(tmp_path)
    run = Signalled(run_cmd(tmp_path, "hangs"))
    signalled.append(run)
    run.wait_until(lambda: bool(labelled(docker_client, run.pid)), "a container of the run listed")
    stopped(run, docker_client, took=run.stop())
    assert not (tmp_path / "card.json").exists() and not (tmp_path / "ledger.json").exists()


@pytest.mark.parametrize("times", [1, 2], ids=["once", "twice"])
def test_sigint_mid_wave(tmp_path: Path, docker_client, sandbox_image: str, signalled, times: int) -> None:
    """SIGINT (once, or twice in quick succession) while hanging probes run: no deadline is waited out."""
    example_suite(tmp_path)
    run = Signalled(run_cmd(tmp_path, "hangs"))
    signalled.append(run)
    run.wait_until(lambda: probe_running(docker_client, run.pid), "a probe running in a container of the run")
    stopped(run, docker_client, took=run.stop(times=times))
    assert run.stderr.count("gate: interrupted") == 1
    assert not (tmp_path / "card.json").exists() and not (tmp_path / "ledger.json").exists()


def test_sigterm_mid_wave_exits_143(tmp_path: Path, docker_client, sandbox_image: str, signalled) -> None:
    """SIGTERM (a CI job cancelled) is Ctrl-C with exit 143: the same clean-up."""
    example_suite(tmp_path)
    run = Signalled(run_cmd(tmp_path, "hangs"))
    signalled.append(run)
    run.wait_until(lambda: probe_running(docker_client, run.pid), "a probe running in a container of the run")
    stopped(run, docker_client, code=143, took=run.stop(signal.SIGTERM))


@pytest.fixture
def dead_containers(docker_client, sandbox_image: str) -> Iterator[list]:
    """Thirty created containers labelled as left by a process of this host that is gone (a pid that
    just exited): what the run's start-up sweep removes one by one."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    labels = {LABEL_RUN: f"dead-{uuid.uuid4().hex[:8]}", LABEL_PID: str(gone.pid), LABEL_HOST: socket.gethostname()}
    made = [docker_client.containers.create(sandbox_image, ["true"], labels=labels) for _ in range(30)]
    yield made
    for container in made:
        # Gone already, or being removed right now by some run's start-up sweep (409): either way it goes.
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            container.remove(force=True)


def test_sigint_while_sweeping(tmp_path: Path, docker_client, sandbox_image: str, signalled, dead_containers) -> None:
    """SIGINT while the run's start-up sweep removes what dead processes left."""
    example_suite(tmp_path)
    dead = {c.id for c in dead_containers}

    def sweeping() -> bool:
        left = {c.id for c in docker_client.containers.list(all=True, filters={"id": list(dead)}, sparse=True)}
        return len(left) < len(dead)

    run = Signalled(run_cmd(tmp_path, "hangs"))
    signalled.append(run)
    # Any run's start-up sweep removes them (other tests' runs too): first wait until ours is at its own.
    run.wait_for_line('"run.open"')
    run.wait_until(sweeping, "a dead process's container removed")
    stopped(run, docker_client, took=run.stop())


def test_sigint_while_building_the_project_image(tmp_path: Path, docker_client, sandbox_image: str, signalled) -> None:
    """SIGINT while the suite's project image builds: the run stops, and the engine drops the build's
    container soon after (the build is cancelled with the client's connection)."""
    token = uuid.uuid4().hex
    example_suite(tmp_path, image='[suite.image]\ndockerfile = "sandbox/Dockerfile"\n')
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / "Dockerfile").write_text(
        f"ARG PROBEGATE_BASE\nFROM ${{PROBEGATE_BASE}}\nRUN sleep 120 && echo {token}\n"
    )
    # A suite with its own image must not be moved to a fresh folder without its Dockerfile: same folder.
    run = Signalled(run_cmd(tmp_path, "good"))
    signalled.append(run)

    def building() -> list:
        # Sparse: the listing's own fields (its command among them), no inspect that a removal could race.
        every = docker_client.containers.list(filters={"status": "running"}, sparse=True)
        return [c for c in every if token in (c.attrs.get("Command") or "")]

    run.wait_until(lambda: bool(building()), "the image build's step running")
    stopped(run, docker_client, took=run.stop())
    assert gone_within(building, 30) is not None, "the engine kept building after the run stopped"


def test_sigint_during_the_base_rerun(suite_repo: Path, docker_client, signalled) -> None:
    """SIGINT while the flickering row's trials rerun on the base, whose code hangs (until its 200 s deadline)."""
    slow_base = SLUGIFY.replace(
        "    plain = ",
        '    if text.startswith("Hello"):\n        import threading\n\n        threading.Event().wait()\n    plain = ',
        1,
    )
    toml = suite_repo / "gate.toml"
    toml.write_text(toml.read_text().replace("deadline_s = 5.0", "deadline_s = 200.0"))
    (suite_repo / "src" / "textkit.py").write_text(slow_base)
    commit_all(suite_repo, "the suite, over a slow but steady textkit")
    (suite_repo / "src" / "textkit.py").write_text(FLICKER)
    commit_all(suite_repo, "a patch that flickers, fast")
    gate = Path(sys.executable).with_name("gate")
    run = Signalled([str(gate), "--log-level", "info", "run", "--base", "HEAD~1"], cwd=suite_repo)
    signalled.append(run)
    run.wait_for_line('"rerun.start"', timeout=180)
    run.wait_until(lambda: probe_running(docker_client, run.pid), "a base trial running")
    stopped(run, docker_client, took=run.stop())
    assert not (suite_repo / ".probegate" / "verdict-card.json").exists()


def test_sigint_while_waiting_for_the_books(tmp_path: Path, docker_client, sandbox_image: str, signalled) -> None:
    """SIGINT while the run queues for the books another run holds: nothing written, no card."""
    example_suite(tmp_path, deadline_s=10.0)
    books = tmp_path / "ledger.json"
    with FileLock(str(books) + ".lock"):
        run = Signalled(run_cmd(tmp_path, "good"))
        signalled.append(run)
        run.wait_for_line('"run.commit"', timeout=180)
        stopped(run, docker_client, took=run.stop())
    assert not (tmp_path / "card.json").exists()
    assert not books.exists()


def busy_run(tmp_path: Path, name: str, docker_client, redis_server, workers, signalled) -> Signalled:
    """A `gate run --broker` of the hanging patch, once worker `name` (the only one) runs its batch."""
    workers.start(name)
    workers.wait_ready()
    example_suite(tmp_path)
    run = Signalled(run_cmd(tmp_path, "hangs", "--broker", redis_server.url, "--allow-unenrolled-workers"))
    signalled.append(run)
    workers.wait_busy(name, docker_client)
    return run


def test_sigint_while_waiting_for_celery_results(
    tmp_path: Path, docker_client, redis_server, workers, signalled
) -> None:
    """SIGINT while a worker runs the run's hanging batch: the coordinator stops within 5 s, and the
    worker stops the batch and removes its containers."""
    run = busy_run(tmp_path, "w1", docker_client, redis_server, workers, signalled)
    took = run.stop()
    record("celery coordinator", took)
    assert took < STOP_WITHIN_S, f"took {took:.1f}s:\n{run.stderr[-3000:]}"
    assert run.proc.returncode == 130 and "Traceback" not in run.stderr, run.stderr
    assert not (tmp_path / "card.json").exists()
    left = gone_within(lambda: containers_of_group(docker_client, workers.procs["w1"].pid), STOP_WITHIN_S)
    assert left is not None, "the worker kept running the stopped run's batch"


def containers_of_group(client: docker.DockerClient, group: int) -> list:
    """Containers started by any process of the session `group` (a worker and its pool processes)."""
    listed = client.containers.list(all=True, filters={"label": LABEL_PID}, sparse=True)
    return [c for c in listed if _group_of(c.attrs.get("Labels", {}).get(LABEL_PID, "")) == group]


def _group_of(pid: str) -> int | None:
    try:
        return os.getpgid(int(pid))
    except (ValueError, ProcessLookupError):
        return None


def test_sigterm_stops_a_busy_worker(tmp_path: Path, docker_client, redis_server, workers, signalled) -> None:
    """SIGTERM to a `gate-worker` running a hanging batch: it exits within 5 s and removes the batch's
    containers (the batch goes back to the queue for another worker)."""
    busy_run(tmp_path, "busy", docker_client, redis_server, workers, signalled)
    worker = workers.procs["busy"]
    pool = [int(pid) for pid in Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()]
    sent = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=2 * STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gate-worker still running {2 * STOP_WITHIN_S:.0f}s after SIGTERM")
    took = time.monotonic() - sent
    record("gate-worker", took)
    said = (tmp_path / "busy.log").read_text()
    assert took < STOP_WITHIN_S, f"took {took:.1f}s:\n{said[-3000:]}"
    assert [c for pid in [worker.pid, *pool] for c in labelled(docker_client, pid)] == [], said[-3000:]


@pytest.mark.parametrize("when", ["filling", "full"])
def test_sigterm_stops_a_pool(tmp_path: Path, docker_client, sandbox_image: str, signalled, when: str) -> None:
    """`gate pool serve` stops on SIGTERM within 5 s (while starting its containers, or full), exit 0,
    removing every container it started."""
    folder = Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp") / f"pg-int-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o700)
    path = folder / "pool.sock"
    pool = Signalled([sys.executable, "-m", "gate.cli", "pool", "serve", "--socket", str(path), "--size", "2"])
    signalled.append(pool)
    want = 1 if when == "filling" else 2
    pool.wait_until(lambda: len(labelled(docker_client, pool.pid, running=True)) >= want, f"{want} pool container(s)")
    took = pool.stop(signal.SIGTERM)
    record(f"pool {when}", took)
    assert took < STOP_WITHIN_S, f"took {took:.1f}s:\n{pool.stderr[-3000:]}"
    assert pool.proc.returncode == 0, pool.stderr
    assert labelled(docker_client, pool.pid) == []
    assert not path.exists()
    folder.rmdir()


def test_a_run_removes_the_containers_a_killed_run_left(tmp_path: Path, docker_client, sandbox_image: str) -> None:
    """A `gate run` killed outright (SIGKILL: no clean-up) leaves its containers; the next `gate run` on this
    host removes them when it starts, and leaves a live process's containers alone."""
    example_suite(tmp_path / "first")
    killed = Signalled(run_cmd(tmp_path / "first", "hangs"))
    try:
        killed.wait_until(lambda: bool(labelled(docker_client, killed.pid)), "a container of the run listed")
    finally:
        killed.kill()
    # Another test's run may sweep them first (its start-up sweep is the same): either way they go.
    live = docker_client.containers.create(
        sandbox_image,
        ["true"],
        labels={LABEL_RUN: "live", LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname()},
    )
    try:
        example_suite(tmp_path / "second", deadline_s=2.0)  # its one hanging trial times out in 2 s
        second = subprocess.run(
            [*run_cmd(tmp_path / "second", "hangs"), "--property", "no_secret_in_output"],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert "Traceback" not in second.stderr, second.stderr
        assert labelled(docker_client, killed.pid) == []
        live.reload()  # still there: its (pretended) owner is alive
    finally:
        live.remove(force=True)


__all__ = ["repo", "suite_repo"]  # the fixtures, imported so pytest finds them
