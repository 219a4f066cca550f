"""Dispatch bookkeeping: trials/s through the local pool and through Celery over Redis, in one run.

Trials are trivial (no container: workers run `gate-worker serve --sandbox null`), so what is
measured is the cost of planning, shipping, gathering and de-duplicating results — the overhead a
broker adds on top of the trial work. Prints both rates and their ratio (Celery / local).

    .venv/bin/python benchmarks/dispatch.py [--trials 10000] [--workers 2] [--repeat 3]

Starts its own redis-server on a free 127.0.0.1 port and stops it, and its workers, at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.core.testing import MockSandbox, make_spec
from gate.core.trial import TrialSpec
from gate.io.snapshot import LocalInputs
from gate.run.executor import LocalExecutor
from worker.celery.dispatch import CeleryExecutor
from worker.celery.tasks import null_observation


def specs(n: int, tree_digest: str, fixture_digest: str, run_id: str) -> list[TrialSpec]:
    common = {"run_id": run_id, "tree_digest": tree_digest, "fixture_digest": fixture_digest}
    return [make_spec(i, property_id=f"p{i * 4 // n}", **common) for i in range(n)]


def timed(executor, plan, inputs) -> float:
    started = time.perf_counter()
    seen = {obs.key: obs for obs in executor.run(plan, inputs)}
    elapsed = time.perf_counter() - started
    assert len(seen) == len(plan), f"{len(seen)} of {len(plan)} trials came back"
    return len(plan) / elapsed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2, help="gate-worker processes (concurrency 1 each)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per executor, interleaved; the median is reported")
    parser.add_argument("--batch", type=int, help="trials per Celery task (default: the executor's own sizing)")
    args = parser.parse_args()
    redis_bin = shutil.which("redis-server")
    if redis_bin is None:
        print("redis-server is not installed (deploy/provision.sh installs it)", file=sys.stderr)
        return 69

    tmp = Path(tempfile.mkdtemp(prefix="probegate-bench-"))
    (tmp / "tree").mkdir()
    (tmp / "tree" / "probe.py").write_text("print('{}')\n")
    fixture = b"{}"
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    redis = subprocess.Popen(
        [redis_bin, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp)],
        stdout=subprocess.DEVNULL,
    )
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "worker.celery.cli",
                "serve",
                "--broker",
                url,
                "--sandbox",
                "null",
                "--concurrency",
                "1",
                "--name",
                f"bench{i}@%h",
                "--cache",
                str(tmp / f"cache{i}"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for i in range(args.workers)
    ]
    try:
        with LocalInputs(tmp / "tree", {hashlib.sha256(fixture).hexdigest(): fixture}) as inputs:
            digest = hashlib.sha256(fixture).hexdigest()
            local = LocalExecutor(MockSandbox(null_observation, image="null"))
            celery = CeleryExecutor(
                url, image="probegate/sandbox-python:trixie-1", worker_wait_s=60, batch_size=args.batch
            )
            discovered = time.perf_counter()
            processes = celery.discover()
            discovery_s = time.perf_counter() - discovered
            local_rates, celery_rates = [], []
            for round_ in range(args.repeat):
                plan = specs(args.trials, inputs.tree_digest, digest, f"bench-{round_}")
                local_rates.append(timed(local, plan, inputs))
                celery_rates.append(timed(celery, plan, inputs))
    finally:
        for proc in workers:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in workers:
            proc.wait(timeout=30)
        redis.terminate()
        redis.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)

    best_local, best_celery = statistics.median(local_rates), statistics.median(celery_rates)
    print(f"trials per run          {args.trials}")
    print(f"worker processes        {processes} (found in {discovery_s:.2f}s, once per coordinator)")
    print(f"local pool (median)     {best_local:10,.0f} trials/s  (runs: {_rates(local_rates)})")
    print(f"celery (median)         {best_celery:10,.0f} trials/s  (runs: {_rates(celery_rates)})")
    print(f"ratio celery/local      {best_celery / best_local:10.2f}")
    return 0


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{r:,.0f}" for r in rates)


if __name__ == "__main__":
    sys.exit(main())
