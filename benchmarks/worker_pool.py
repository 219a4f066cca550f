"""A distributed fresh run with the worker's standing pool against the local pooled run (issue 27), in one run:

    .venv/bin/python -m benchmarks.worker_pool [--trials 40] [--wave 5] [--repeats 3]

Each round times, on one tree (the probe of common.py) and one container each: the bare loop of
the probe inside one running container (the baseline); a local fresh run (open .. close) whose container
comes from a standing pool (worker/host/pool.py, as `gate pool serve` keeps it); a distributed fresh run
through Celery over a private redis-server to a `gate-worker serve --pool own` (concurrency 1: its
batches run one after another in one container, as the local run's do); and the same through a worker
without a pool (`--pool off`), which pays the container start in the run (the two in alternating order).
Every pool is full before a timed run starts. Prints each row's ratio to the bare loop and the distributed
runs' to the local pooled one (median over rounds: the machine is shared), each distributed run's parts
(the first batch's wait is where a container start shows), then the JSON of every figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.common import CLOCK, FIXTURE, make_tree, timed_bare_loop
from gate.core.suite.batching import batches
from gate.core.suite.trial import Limits, Observation, TrialSpec
from gate.core.testing import make_specs
from gate.io.snapshot import LocalInputs
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.app import make_app
from worker.host.engine import DEFAULT_IMAGE, docker_client, resolve_image_id
from worker.host.pool import LABEL_POOL, PoolServer
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import LABEL_RUN, sweep, sweep_dead_workers

LIMITS = Limits()
QUEUES = {"pool": "bench-worker-pool", "fresh": "bench-worker-fresh"}


def specs(run_id: str, inputs: LocalInputs, n: int) -> list[TrialSpec]:
    [digest] = inputs.fixtures
    return make_specs(
        n, run_id=run_id, property_id="bench", tree_digest=inputs.tree_digest, fixture_path="input.json",
        fixture_digest=digest, deadline_s=10.0, clock=CLOCK, limits=LIMITS,
    )  # fmt: skip


def checked(observed: list[Observation], n: int, what: str) -> None:
    bad = [o.fault or o.exit_code for o in observed if o.fault or o.exit_code]
    if len(observed) != n or bad:
        raise SystemExit(f"{what}: {len(observed)} of {n} trials, faults {bad[:2]}")


def local_pooled(client, inputs: LocalInputs, n: int, wave: int, path: Path) -> float:
    """A local fresh run as `gate run` makes it (open, prestart, batches, close), its container from the pool."""
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    sandbox = DockerSandbox(client=client, worker_id="bench", pool=path)
    observed: list[Observation] = []
    try:
        started = time.monotonic()
        sandbox.open(run_id)
        sandbox.prestart(run_id, LIMITS, 1)
        for group in batches(specs(run_id, inputs, n), wave):
            observed += sandbox.run_batch(group, inputs)
        sandbox.close(run_id)
        took = time.monotonic() - started
    finally:
        sweep(client, run_id)
    checked(observed, n, "local pooled run")
    if sandbox._containers.pool_note:
        raise SystemExit(f"local pooled run: {sandbox._containers.pool_note}")
    return took


def distributed(executor: CeleryExecutor, client, inputs: LocalInputs, n: int) -> dict[str, float]:
    """A fresh run through Celery (open .. close) to the worker on the executor's queue: its seconds in all
    and in parts (open, the first batch's observations, every trial, close), and how many containers were
    created for it (the engine's events by the run's label)."""
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    since = time.time()
    observed: list[Observation] = []
    try:
        started = time.monotonic()
        executor.open(run_id, LIMITS)
        opened = first = time.monotonic()
        for obs in executor.run(specs(run_id, inputs, n), inputs):
            first = first if observed else time.monotonic()
            observed.append(obs)
        ran = time.monotonic()
        executor.close(run_id)
        closed = time.monotonic()
    finally:
        sweep(client, run_id)
    checked(observed, n, f"distributed run on {executor.queue}")
    filters = {"type": "container", "event": "create", "label": f"{LABEL_RUN}={run_id}"}
    created = sum(1 for _ in client.events(since=int(since) - 1, until=int(time.time()) + 1, filters=filters))
    return {
        "total": closed - started, "open": opened - started, "first": first - opened, "trials": ran - opened,
        "close": closed - ran, "created": created,
    }  # fmt: skip


def start_worker(tmp: Path, url: str, name: str, pool: str) -> subprocess.Popen[bytes]:
    log = (tmp / f"{name}.log").open("wb")
    argv = [
        sys.executable, "-m", "worker.celery.worker.cli", "serve", "--broker", url, "--concurrency", "1",
        "--name", f"{name}@%h", "--key", str(tmp / f"{name}.key"), "--cache", str(tmp / f"cache-{name}"),
        "--queue", QUEUES[name], "--pool", pool,
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_workers(tmp: Path, url: str, procs: dict[str, subprocess.Popen[bytes]], timeout: float = 120) -> None:
    app = make_app(url)
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise SystemExit(f"worker {name} exited: {(tmp / f'{name}.log').read_text()[-1500:]}")
        seen = {key.split("@")[0] for reply in app.control.ping(timeout=0.5) or [] for key in reply}
        if set(procs) <= seen:
            return
    raise SystemExit("workers not ready")


def own_pool_socket(tmp: Path) -> str:
    found = re.search(r"own pool of \d+ container\(s\) on (\S+)", (tmp / "pool.log").read_text())
    if found is None:
        raise SystemExit("the pooled worker did not say where its pool listens")
    return found.group(1)


def wait_pool(client, path: str, but: frozenset[str] = frozenset(), timeout: float = 60) -> frozenset[str]:
    """Until the worker's pool keeps a running container other than `but` (those a run took); their IDs.
    No timed run starts while a pool refills: a container start costs the engine's CPU."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        running = client.containers.list(filters={"label": f"{LABEL_POOL}={path}", "status": "running"}, sparse=True)
        if ids := frozenset(c.id for c in running) - but:
            return ids
        time.sleep(0.1)
    raise SystemExit(f"the worker's pool at {path} never filled")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--wave", type=int, default=5, help="trials per batch")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (each times every row once)")
    args = parser.parse_args()
    redis_bin = shutil.which("redis-server")
    if redis_bin is None:
        print("redis-server is not installed (deploy/provision.sh installs it)", file=sys.stderr)
        return 69
    client = docker_client()
    image_id = resolve_image_id(client, DEFAULT_IMAGE)
    tmp = Path(tempfile.mkdtemp(prefix="probegate-bench-"))
    tree = make_tree(tmp / "tree", 0)
    (tmp / "bare").mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    redis = subprocess.Popen(
        [redis_bin, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp)],
        stdout=subprocess.DEVNULL,
    )
    procs = {"pool": start_worker(tmp, url, "pool", "own"), "fresh": start_worker(tmp, url, "fresh", "off")}
    server = PoolServer(tmp / "local-pool.sock", size=1, client=client)
    got: dict[str, list[float]] = {"bare": [], "local": [], "dist_pool": [], "dist_fresh": []}
    parts: dict[str, list[dict[str, float]]] = {"dist_pool": [], "dist_fresh": []}
    try:
        server.start()
        server.want(image_id, LIMITS, DockerSandbox(client=client).work_copy()[0])
        wait_workers(tmp, url, procs)
        path = own_pool_socket(tmp)
        executors = {name: CeleryExecutor(url, queue=queue, batch_size=args.wave) for name, queue in QUEUES.items()}
        with LocalInputs(tree, {hashlib.sha256(FIXTURE).hexdigest(): FIXTURE}) as inputs:
            distributed(executors["fresh"], client, inputs, args.wave)  # blobs uploaded, image queues known
            taken: frozenset[str] = frozenset()
            for round_ in range(args.repeats):
                run_id = f"bench-{uuid.uuid4().hex[:12]}"
                try:
                    got["bare"].append(timed_bare_loop(client, image_id, tree, tmp / "bare", args.trials, run_id))
                finally:
                    sweep(client, run_id)
                server.wait_full(timeout_s=60)
                wait_pool(client, path, but=taken)
                got["local"].append(local_pooled(client, inputs, args.trials, args.wave, server.path))
                # Which goes first alternates: on a shared machine the load moves within a round too.
                for kind in ("dist_pool", "dist_fresh")[:: 1 if round_ % 2 else -1]:
                    server.wait_full(timeout_s=60)  # both pools full again before anything is timed
                    ready = wait_pool(client, path, but=taken)  # not the one the last pooled run took
                    taken = ready if kind == "dist_pool" else taken
                    parts[kind].append(distributed(executors[kind.removeprefix("dist_")], client, inputs, args.trials))
                    got[kind].append(parts[kind][-1]["total"])
    finally:
        server.stop()
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        redis.terminate()
        redis.wait(timeout=10)
        sweep_dead_workers(client)
        shutil.rmtree(tmp, ignore_errors=True)
    report(got, args.trials)
    for kind, name in (("dist_pool", "with the worker's pool"), ("dist_fresh", "without a pool")):
        split = "  ".join(
            f"{k} {1000 * statistics.median(p[k] for p in parts[kind]):.0f}"
            for k in ("open", "first", "trials", "close")
        )
        made = [int(p["created"]) for p in parts[kind]]
        print(f"distributed run {name}, median ms: {split}; containers created in the run: {made}")
    print(json.dumps({"seconds": got, "parts": parts}))
    return 0


def report(got: dict[str, list[float]], n: int) -> None:
    """Per row: its best time per trial and its ratio to the bare loop (each round against its own bare loop,
    the median over rounds); then the distributed runs against the local pooled run."""

    def ratio(num: str, den: str) -> float:
        return statistics.median(a / b for a, b in zip(got[num], got[den], strict=True))

    names = {
        "bare": "bare loop in one container",
        "local": "local fresh run, standing pool",
        "dist_pool": "distributed fresh run, worker's pool",
        "dist_fresh": "distributed fresh run, no pool",
    }
    for key, name in names.items():
        best = min(got[key])
        print(f"{name:<40} {n / best:6.1f} trials/s {1000 * best / n:7.1f} ms/trial  vs bare {ratio('bare', key):.2f}")
    saved = statistics.median(f - p for f, p in zip(got["dist_fresh"], got["dist_pool"], strict=True))
    print(
        f"distributed with the worker's pool vs local pooled: {ratio('local', 'dist_pool'):.2f}; "
        f"without a pool vs local pooled: {ratio('local', 'dist_fresh'):.2f}; "
        f"the worker's pool saves {1000 * saved:.0f} ms a run"
    )


if __name__ == "__main__":
    sys.exit(main())
