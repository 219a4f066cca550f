"""How well `gate flakes explain` names the cause of each deliberately flaky probe of `examples/flaky`, and
what it costs: per property the source it was built with, the source explain named, the trials it spent
(budget 200) and the wall time, on the local pool and through two enrolled `gate-worker serve` processes
over a private redis-server (real Docker both ways).

The baseline of the ratio is the same explanation's trials on the local pool: through Celery the answers
must be the same (the source named); the trial counts differ only by what the random sources drew.

    .venv/bin/python -m benchmarks.flake_explain [--repeat 1] [--only local|celery] [--property ID ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import bench_fleet, start_fleet
from gate.cli import logs
from gate.cli.executors import Placement, default_executor
from gate.core.policy.explain import BUDGET, Explanation
from gate.io.workers import load_roster
from gate.run.executors.base import Executor
from gate.run.explain import ExplainRequest, explain_flakes
from worker.celery.coordinator.dispatch import CeleryExecutor

ROOT = Path(__file__).resolve().parents[1]

EXAMPLE = ROOT / "examples" / "flaky"
# What each property of examples/flaky was built to depend on ("steady": nothing to explain).
BUILT_WITH = {
    "flaky_seed": "trial_seed",
    "flaky_hash_order": "hash_seed",
    "flaky_addresses": "aslr",
    "flaky_deadline": "cpus",
    "flaky_wall_clock": "clock",
    "flaky_warm_state": "interpreter",
    "flaky_seed_and_hash": "trial_seed+hash_seed",
    "flaky_entropy": "residual",
    "steady": "steady",
}


def explain(pid: str, make: Callable[[str | None], Executor]) -> tuple[Explanation, float]:
    """One property explained on the example's tree (taken as the base), and the seconds it took."""
    request = ExplainRequest(
        suite=EXAMPLE / "gate.toml", workdir=EXAMPLE, properties=(pid,), allow_unchecked_oracle=True
    )
    started = time.monotonic()
    [found] = explain_flakes(request, executor_factory=make)
    return found, time.monotonic() - started


def named(found: Explanation) -> str:
    return found.source or str(found.finding)


def table(rows: list[tuple[str, str, Explanation, float]]) -> None:
    print("| where | property | built with | named | right | trials | seconds |")
    print("|---|---|---|---|---|---:|---:|")
    for where, pid, found, seconds in rows:
        right = "yes" if named(found) == BUILT_WITH[pid] else "NO"
        print(f"| {where} | {pid} | {BUILT_WITH[pid]} | {named(found)} | {right} | {found.trials} | {seconds:.1f} |")
    wrong = [r for r in rows if named(r[2]) != BUILT_WITH[r[1]]]
    over = [r for r in rows if r[2].trials > BUDGET]
    print(f"\n{len(rows) - len(wrong)}/{len(rows)} named right; {len(over)} over the budget of {BUDGET} trials")
    for where, pid, found, _ in wrong:
        print(f"  {where} {pid}: {found.words}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", choices=("local", "celery"))
    parser.add_argument("--property", action="append", default=[], choices=sorted(BUILT_WITH))
    args = parser.parse_args()
    logs.configure("warning")  # the table goes to stdout; structlog's default is stdout too
    pids = args.property or list(BUILT_WITH)
    rows: list[tuple[str, str, Explanation, float]] = []
    if args.only in (None, "local"):
        local = lambda image: default_executor(Placement(), image, None)  # noqa: E731
        for _ in range(args.repeat):
            for pid in pids:
                found, seconds = explain(pid, local)
                rows.append(("local", pid, found, seconds))
                print(f"local {pid}: {named(found)} in {found.trials} trials, {seconds:.1f} s", file=sys.stderr)
    if args.only in (None, "celery"):
        with bench_fleet("explain", "print('unused')\n", ["w1", "w2"]) as fleet:
            start_fleet(fleet.workers, ["w1", "w2"], {}, concurrency=1)
            roster = lambda: load_roster(fleet.registry)  # noqa: E731

            def celery(image: str | None) -> Executor:
                options = {"image": image} if image else {}
                return CeleryExecutor(fleet.redis.url, worker_wait_s=60, enrolled=roster, **options)

            for _ in range(args.repeat):
                for pid in pids:
                    found, seconds = explain(pid, celery)
                    rows.append(("celery", pid, found, seconds))
                    print(f"celery {pid}: {named(found)} in {found.trials} trials, {seconds:.1f} s", file=sys.stderr)
    table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
