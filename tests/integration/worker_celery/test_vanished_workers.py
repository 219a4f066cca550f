"""A worker that vanishes mid-run without a goodbye, through real Redis, real enrolled `gate-worker serve`
processes (each under its own broker user) and real Docker: its batches go to the other enrolled worker once its
heartbeat lapses, seconds after the loss rather than after the result timeout, and every trial comes back once,
clean. Two ways to vanish: the whole process group SIGKILLed with its containers removed (a server powered off),
and its link to the broker gone silent with no FIN (the worker process still runs, cut off)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from stallproxy import StallingProxy
from support.servers import GATE, RedisServer, Workers, enrol

from gate.core.suite.trial import Observation
from gate.core.testing import make_specs
from gate.io.snapshot import LocalInputs
from gate.io.workers import load_roster
from worker.celery.coordinator.dispatch import CeleryExecutor

pytestmark = pytest.mark.integration

TRIALS = 24
RESULT_TIMEOUT_S = 120.0  # what the run would wait without heartbeats (the default is over ten minutes)
WITHIN_S = 60.0  # the loss is noticed in about 10 s; the moved trials then run on the one worker left


class Run:
    """`executor.run` over TRIALS short trials on a thread, so the test can make a worker vanish meanwhile."""

    def __init__(self, executor: CeleryExecutor, tmp: Path) -> None:
        tree = tmp / "tree"
        tree.mkdir()
        (tree / "probe.py").write_text("import time\ntime.sleep(0.3)\nprint('{}')\n")
        self.fixture = b"{}"
        self.executor, self.tree = executor, tree
        self.observations: list[Observation] = []
        self.ended = threading.Event()
        self.error: BaseException | None = None
        threading.Thread(target=self._run, name="vanish-run", daemon=True).start()

    def _run(self) -> None:
        digest = hashlib.sha256(self.fixture).hexdigest()
        try:
            with LocalInputs(self.tree, {digest: self.fixture}) as inputs:
                specs = make_specs(TRIALS, run_id="vanish", tree_digest=inputs.tree_digest, fixture_digest=digest)
                self.observations.extend(self.executor.run(specs, inputs))
        except BaseException as exc:
            self.error = exc
        finally:
            self.ended.set()

    def wait(self, timeout: float) -> list[Observation]:
        assert self.ended.wait(timeout), f"the run did not end within {timeout:.0f}s of the loss"
        assert self.error is None, self.error
        return self.observations


@pytest.fixture
def two_workers(workers: Workers, redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[Workers, Path]]:
    """w1 and w2 enrolled under their own broker users (started by each test, which may reroute w2)."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "w1", "w2", admin=redis_server.url)
    yield workers, registry


def executor_for(url: str, registry: Path) -> CeleryExecutor:
    return CeleryExecutor(
        url, worker_wait_s=60, result_timeout_s=RESULT_TIMEOUT_S, batch_size=2, enrolled=lambda: load_roster(registry)
    )


def check_moved(run: Run, executor: CeleryExecutor, lost_at: float) -> None:
    """Every trial came back once and clean, the run ended well before the result timeout, and the card's
    events say which of box-w2's batches went to box-w1: copied once box-w1 was idle (the first answer counts),
    or moved once box-w2 was presumed gone, whichever came first."""
    observations = run.wait(WITHIN_S)
    ended_after = time.monotonic() - lost_at
    assert sorted(o.trial_index for o in observations) == list(range(TRIALS)), observations
    bad = [
        (o.trial_index, o.fault, o.exit_code, o.stdout)
        for o in observations
        if o.fault or o.exit_code or o.stdout.data != b"{}\n"
    ]
    assert not bad, bad
    gone = [e for e in executor.events if e.kind == "worker_gone"]
    moved = [e for e in executor.events if e.kind in ("batch_reassigned", "batch_duplicated")]
    assert len(gone) <= 1 and all("'box-w2'" in e.detail for e in gone), executor.events
    assert moved and all("'box-w2'" in e.detail and "'box-w1'" in e.detail for e in moved), executor.events
    assert ended_after < WITHIN_S, ended_after
    assert {o.worker_id for o in observations} <= {"box-w1", "box-w2"}


def start_run(
    workers: Workers, url: str, registry: Path, tmp: Path, docker_client, lose: Callable[[], None]
) -> tuple[Run, CeleryExecutor, float]:
    """Start both workers, the run, and once w2 holds a batch, `lose` it; (the run, its executor, when lost)."""
    workers.start("w1")
    workers.start("w2")
    workers.wait_ready()
    executor = executor_for(url, registry)
    run = Run(executor, tmp)
    workers.wait_busy("w2", docker_client)
    lose()
    return run, executor, time.monotonic()


def test_a_worker_killed_mid_run_has_its_batches_moved_within_seconds(
    two_workers: tuple[Workers, Path], redis_server: RedisServer, tmp_path: Path, docker_client
) -> None:
    """w2's process group is SIGKILLed and its containers removed while it holds batches: within seconds (its
    heartbeat lapsed, no result timeout waited out) they run on w1, every trial once and clean."""
    workers, registry = two_workers
    lost = lambda: workers.vanish("w2", docker_client)  # noqa: E731
    run, executor, lost_at = start_run(workers, redis_server.url, registry, tmp_path, docker_client, lost)
    check_moved(run, executor, lost_at)
    # Presumed gone only once its heartbeat had lapsed: `gate workers status` shows it gone, w1 up.
    status = subprocess.run(
        [GATE, "workers", "status", "--json", "--workers", str(registry), "--redis-admin-url", redis_server.url],
        capture_output=True,
        text=True,
        check=True,
    )
    *rows, _ = (json.loads(line) for line in status.stdout.splitlines())
    assert {row["name"]: row["state"] for row in rows} == {"box-w1": "up", "box-w2": "gone"}, rows
    assert all(row["last_seen"] for row in rows), rows


def test_a_worker_whose_link_went_silent_has_its_batches_moved_within_seconds(
    two_workers: tuple[Workers, Path], redis_server: RedisServer, tmp_path: Path, docker_client
) -> None:
    """w2 reaches the broker through a proxy that goes silent mid-run with no FIN (w2 still runs, cut off):
    its heartbeat lapses and its batches run on w1, every trial once and clean."""
    workers, registry = two_workers
    proxy = StallingProxy(redis_server.port)
    try:
        workers.urls["w2"] = proxy.url(workers.urls["w2"])
        run, executor, lost_at = start_run(workers, redis_server.url, registry, tmp_path, docker_client, proxy.stall)
        check_moved(run, executor, lost_at)
    finally:
        workers.kill("w2")  # cut off, it could not shut down cleanly
        proxy.close()
