"""Coordinator-chosen workers against the shared queue: trials/s through Celery and real Docker with two
enrolled workers whose batches the coordinator assigns to their direct queues, against the same two
workers taking batches off the shared queue (a coordinator without a registry, as under
`--allow-unenrolled-workers`), in one run, as a ratio.

The same two `gate-worker serve` processes (Docker sandbox, concurrency 1) serve both coordinators;
runs alternate between them, the order swapped every round, and each run is a fresh run id (its
containers opened on its first batch and closed at its end, as `gate run` does). Trials run a trivial
probe, so the figure is what assignment costs a run whose trials are cheap: a worker that falls behind
keeps its share instead of leaving it to the other.

    .venv/bin/python -m benchmarks.dispatch --assigned [--trials 160] [--repeat 3]
"""

from __future__ import annotations

import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import dispatch_specs, enrolled_roster
from gate.core.suite.trial import Limits
from gate.io.keys import public_path
from gate.io.snapshot import LocalInputs
from tests.support.servers import RedisServer, Workers
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.host.engine import DEFAULT_IMAGE

NAMES = ("bench0", "bench1")  # enrolled_roster names the keys bench0, bench1 in this order


def one_run(executor: CeleryExecutor, inputs: LocalInputs, n: int, run_id: str, digest: str) -> tuple[float, dict]:
    """Trials/s of one run of `n` trials, open to close, and how many each worker answered."""
    plan = [
        spec.model_copy(update={"image_id": executor.image_id(), "deadline_s": 10.0})
        for spec in dispatch_specs(n, inputs.tree_digest, digest, run_id)
    ]
    started = time.perf_counter()
    executor.open(run_id, Limits())
    try:
        seen = {obs.key: obs for obs in executor.run(plan, inputs)}
    finally:
        executor.close(run_id)
    elapsed = time.perf_counter() - started
    faults = [obs.fault for obs in seen.values() if obs.fault]
    assert len(seen) == n and not faults, f"{len(seen)} of {n} came back, faults: {faults[:3]}"
    by_worker: dict[str, int] = {}
    for obs in seen.values():
        by_worker[obs.worker_id.split("@")[0]] = by_worker.get(obs.worker_id.split("@")[0], 0) + 1
    return n / elapsed, by_worker


def main(trials: int, repeat: int) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="probegate-assigned-"))
    (tmp / "tree").mkdir()
    (tmp / "tree" / "probe.py").write_text("print('{}')\n")
    fixture = b"{}"
    digest = hashlib.sha256(fixture).hexdigest()
    redis = RedisServer(tmp / "redis")
    redis.start()
    workers = Workers(redis.url, tmp)
    rates: dict[str, list[float]] = {"assigned": [], "shared": []}
    shares: dict[str, list[dict]] = {"assigned": [], "shared": []}
    try:
        for name in NAMES:
            workers.start(name)  # the Docker sandbox; each makes its key at start
        workers.wait_ready()
        roster = enrolled_roster([public_path(workers.key(name)) for name in NAMES])
        executors = {
            "assigned": CeleryExecutor(redis.url, image=DEFAULT_IMAGE, worker_wait_s=60, enrolled=lambda: roster),
            "shared": CeleryExecutor(redis.url, image=DEFAULT_IMAGE, worker_wait_s=60),
        }
        with LocalInputs(tmp / "tree", {digest: fixture}) as inputs:
            for executor in executors.values():
                executor.discover()
                one_run(executor, inputs, 8, f"warm-{id(executor)}", digest)  # image ids, first containers
            for round_ in range(repeat):
                order = list(executors) if round_ % 2 == 0 else list(executors)[::-1]
                for mode in order:
                    rate, by_worker = one_run(executors[mode], inputs, trials, f"bench-{mode}-{round_}", digest)
                    rates[mode].append(rate)
                    shares[mode].append(by_worker)
                    print(f"  round {round_ + 1} {mode}: {rate:.1f} trials/s {by_worker}", file=sys.stderr)
    finally:
        workers.stop_all()
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    assigned, shared = statistics.median(rates["assigned"]), statistics.median(rates["shared"])
    print(f"trials per run          {trials} (Docker, 2 workers of concurrency 1, {repeat} runs each, interleaved)")
    for label, mode, rate in (("shared queue", "shared", shared), ("assigned", "assigned", assigned)):
        line = f"{label + ' (median)':<24}{rate:8.1f} trials/s  (runs: {_rates(rates[mode])})"
        print(f"{line}  trials per worker: {_split(shares[mode])}")
    print(f"ratio assigned/shared   {assigned / shared:8.2f}")
    rounds = [a / b for a, b in zip(rates["assigned"], rates["shared"], strict=True)]
    print(f"ratio per round         {', '.join(f'{r:.2f}' for r in rounds)}  (the two runs of a round back to back)")
    return 0


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{r:.1f}" for r in rates)


def _split(runs: list[dict]) -> str:
    return "; ".join("/".join(str(run.get(name, 0)) for name in sorted(run)) for run in runs)
