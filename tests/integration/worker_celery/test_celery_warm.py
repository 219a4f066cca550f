"""Warm containers through Celery: real redis-server, real `gate-worker serve` processes, real Docker.

A worker process opens a run on its first batch and keeps one container for every later batch of
it; `CeleryExecutor.close` removes the run's containers at once, and a coordinator that vanishes
leaves them only until the worker's idle janitor closes the run.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from run_containers import containers_created, containers_of, gone_within
from support.servers import RedisServer, Workers

from gate.core.suite.trial import Limits, Observation, TrialSpec
from gate.core.testing import make_specs
from gate.io.snapshot import LocalInputs
from worker.celery.coordinator.dispatch import CeleryExecutor

pytestmark = pytest.mark.integration

TRIALS, BATCH = 6, 2  # three batches per wave


@pytest.fixture
def inputs(tmp_path: Path) -> Iterator[LocalInputs]:
    """A patched tree whose probe prints an empty JSON object, and one fixture."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "probe.py").write_text("print('{}')\n")
    fixture = b"{}"
    with LocalInputs(tmp_path / "tree", {hashlib.sha256(fixture).hexdigest(): fixture}) as local:
        yield local


def specs(run_id: str, inputs: LocalInputs, first: int = 0) -> list[TrialSpec]:
    [fixture_digest] = inputs.fixtures
    return make_specs(
        TRIALS,
        first=first,
        run_id=run_id,
        property_id="warm",
        tree_digest=inputs.tree_digest,
        fixture_digest=fixture_digest,
        deadline_s=5.0,
    )


def run_wave(executor: CeleryExecutor, run_id: str, inputs: LocalInputs, first: int = 0) -> list[Observation]:
    seen = list(executor.run(specs(run_id, inputs, first), inputs))
    assert len(seen) == TRIALS and all(o.fault is None and o.exit_code == 0 for o in seen), seen
    return seen


@pytest.fixture
def executor(redis_server: RedisServer) -> CeleryExecutor:
    return CeleryExecutor(redis_server.url, worker_wait_s=30, batch_size=BATCH)


def test_batches_of_a_run_share_one_container(
    workers: Workers, executor: CeleryExecutor, inputs: LocalInputs, run_id: str, docker_client
) -> None:
    """One worker process serves every batch of a run, over two waves, from a single container."""
    workers.start("w1", concurrency=1)
    workers.wait_ready()
    t0 = time.time()
    executor.open(run_id, Limits())
    try:
        run_wave(executor, run_id, inputs)
        run_wave(executor, run_id, inputs, first=TRIALS)
    finally:
        executor.close(run_id)
    assert containers_created(docker_client, run_id, t0) == 1  # one per batch (six) without warm runs


def test_close_removes_the_runs_containers_at_once(
    workers: Workers, executor: CeleryExecutor, inputs: LocalInputs, run_id: str, docker_client
) -> None:
    """After `close`, no container of the run remains within seconds, long before the idle janitor would act."""
    workers.start("w1", concurrency=2)
    workers.wait_ready()
    executor.open(run_id, Limits())
    run_wave(executor, run_id, inputs)
    listing = containers_of(docker_client, run_id)
    assert listing(), "the run's warm container should wait for its next batch"
    executor.close(run_id)
    took = gone_within(listing, 5.0)
    assert took is not None, [c.name for c in listing()]
    print(f"containers gone {took:.2f}s after close")


def test_a_vanished_coordinator_leaves_containers_only_until_the_janitor(
    workers: Workers, executor: CeleryExecutor, inputs: LocalInputs, run_id: str, docker_client
) -> None:
    """A run never closed by its coordinator is closed by the worker's janitor after PROBEGATE_RUN_IDLE_S."""
    workers.env["PROBEGATE_RUN_IDLE_S"] = "2"
    workers.start("w1", concurrency=1)
    workers.wait_ready()
    run_wave(executor, run_id, inputs)  # never opened or closed here, as if the coordinator died
    listing = containers_of(docker_client, run_id)
    assert listing(), "the run's warm container should wait for its next batch"
    took = gone_within(listing, 10.0)
    assert took is not None, [c.name for c in listing()]
    print(f"containers gone {took:.2f}s after the last batch")
