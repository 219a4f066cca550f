"""A gate-worker's standing pool, through real redis-server, a real `gate-worker serve --pool own` and real
Docker: a run's batches take the pool's started containers, so the run creates none of its own; its
observations are those of a fresh container; closing the run removes what it took at once, and the pool
refills for the next run. (The example's patches earn the local pool's kinds through a `--pool own` worker in
test_celery.py, whose fleet has one.)"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from run_containers import containers_created
from support.servers import RedisServer, Workers

from gate.core.suite.trial import Limits, Observation, TrialSpec
from gate.core.testing import make_spec
from gate.io.snapshot import LocalInputs
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.host.pool import LABEL_POOL
from worker.host.sandboxes.docker import DockerSandbox

pytestmark = pytest.mark.integration

PROBES = {  # what each trial runs, and so what its observation must say
    "ok": ("python3", "probe.py"),
    "exit3": ("python3", "-c", "import sys; print('{}'); sys.exit(3)"),
    # Never exits: the sandbox kills it at the 2 s deadline, so its observation says timed out.
    "hangs": ("python3", "-c", "import threading; threading.Event().wait()"),
    "stderr": ("python3", "-c", "import sys; sys.stderr.write('said'); print('{\"k\": 1}')"),
}


@pytest.fixture
def inputs(tmp_path: Path) -> Iterator[LocalInputs]:
    """A patched tree whose probe prints an empty JSON object, and one fixture."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "probe.py").write_text("print('{}')\n")
    fixture = b"{}"
    with LocalInputs(tmp_path / "tree", {hashlib.sha256(fixture).hexdigest(): fixture}) as local:
        yield local


def specs(run_id: str, inputs: LocalInputs) -> list[TrialSpec]:
    """One trial per probe, all of one shape (tree, clock, limits, image): one container serves them."""
    [fixture_digest] = inputs.fixtures
    shared = {"run_id": run_id, "property_id": "pooled", "tree_digest": inputs.tree_digest, "deadline_s": 2.0}
    return [
        make_spec(i, probe_argv=argv, fixture_digest=fixture_digest, **shared) for i, argv in enumerate(PROBES.values())
    ]


def outcome(obs: Observation) -> tuple:
    return (obs.fault, obs.exit_code, obs.timed_out, obs.stdout.data, obs.stderr.data)


def pool_path(workers: Workers, name: str, timeout: float = 30) -> str:
    """The socket of the worker's own pool, from its log."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        found = re.search(r"own pool of \d+ container\(s\) on (\S+)", (workers.tmp / f"{name}.log").read_text())
        if found:
            return found.group(1)
        time.sleep(0.1)
    raise AssertionError(f"worker {name} never said where its pool listens")


def ready(docker_client, path: str, count: int, timeout: float = 60, but: frozenset[str] = frozenset()) -> set[str]:
    """Wait until the pool at `path` keeps `count` running containers (none of `but`); their IDs."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        # Sparse: a full listing inspects each container, which races a removal (404 for one just listed).
        pooled = {"label": f"{LABEL_POOL}={path}", "status": "running"}
        running = docker_client.containers.list(filters=pooled, sparse=True)
        ids = {c.id for c in running} - but
        if len(ids) >= count:
            return ids
        time.sleep(0.2)
    raise AssertionError(f"the pool at {path} never kept {count} container(s)")


def test_a_run_through_a_worker_with_a_pool_starts_no_container(
    workers: Workers, redis_server: RedisServer, inputs: LocalInputs, run_id: str, docker_client
) -> None:
    """With `--pool own`, two runs in a row through the worker create no container of their own, observe what
    a fresh container observes, and `close` has the pool remove each run's container at once (then refill)."""
    workers.start("w1", "--pool", "own", concurrency=1)
    workers.wait_ready()
    path = pool_path(workers, "w1")
    executor = CeleryExecutor(redis_server.url, worker_wait_s=30, batch_size=len(PROBES))
    first = ready(docker_client, path, 1)
    seen: dict[str, list[tuple]] = {}
    for attempt in ("a", "b"):
        rid = f"{run_id}-{attempt}"
        t0 = time.time()
        executor.open(rid, Limits())
        try:
            observed = sorted(executor.run(specs(rid, inputs), inputs), key=lambda o: o.trial_index)
            seen[attempt] = [outcome(o) for o in observed]
        finally:
            executor.close(rid)
        assert containers_created(docker_client, rid, t0) == 0, f"run {attempt} started a container of its own"
        # The container the run took is removed at the close (not when the worker's janitor closes the run) ...
        give_up, pooled = time.monotonic() + 10, {"label": f"{LABEL_POOL}={path}"}
        while first & {c.id for c in docker_client.containers.list(all=True, filters=pooled, sparse=True)}:
            assert time.monotonic() < give_up, "the run's pooled container outlived its close"
            time.sleep(0.1)
        first = ready(docker_client, path, 1, but=frozenset(first))  # ... and the pool refills for the next run
    fresh = DockerSandbox(pool="off")
    local = f"{run_id}-local"
    fresh.open(local)
    try:
        expected = [outcome(o) for o in fresh.run_batch(specs(local, inputs), inputs)]
    finally:
        fresh.close(local)
    assert seen["a"] == seen["b"] == expected
    assert expected[0][:3] == (None, 0, False) and expected[1][1] == 3 and expected[2][2], expected
