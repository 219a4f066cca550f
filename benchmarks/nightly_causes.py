"""Whether the nightly pair (`gate baseline --twice`) names the cause of each flake it establishes on
`examples/flaky`, on the local pool and through two enrolled `gate-worker serve` processes over a private
redis-server (real Docker and git both ways).

Each pair runs the example's baseline twice on its own commit. A property is established as a flake only when
its colour differs between the two runs, so a property whose source the gate holds fixed in ordinary runs
(the clock, the interpreter, the CPU quota) never is: the table counts, per property, the pairs that
established it and, of those, the ones whose measured cause is the source the probe was built with
(`benchmarks.flake_explain.BUILT_WITH`, the baseline of "right").

    .venv/bin/python -m benchmarks.nightly_causes [--pairs 6] [--only local|celery]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import bench_fleet, start_fleet
from benchmarks.flake_explain import BUILT_WITH, EXAMPLE

GATE = Path(sys.executable).with_name("gate")


def base_repo(tmp: Path) -> Path:
    """examples/flaky committed as the only commit of a fresh git repository."""
    root = tmp / "flaky"
    shutil.copytree(EXAMPLE, root)
    author = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost"}
    env = {**os.environ, **author, "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "the flaky example"]):
        subprocess.run(["git", *argv], cwd=root, env=env, check=True)
    return root


def pair(repo: Path, out: Path, *executor: str) -> tuple[dict[str, str], float]:
    """One nightly pair on the repo's commit: each established flake and the cause its explanation named."""
    out.mkdir(parents=True)
    argv = [str(GATE), "--log-level", "warning", "baseline", "--twice", "--base", "HEAD", "--new-ledger"]
    argv += ["--calibration", str(out / "calibration.json"), "--card", str(out / "card.json")]
    argv += ["--ledger", str(out / "ledger.json"), *executor]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if not (out / "card.json").exists():
        raise SystemExit(f"nightly pair wrote no card (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    card = json.loads((out / "card.json").read_text())
    causes = {c["property_id"]: c["source"] or c["finding"] for c in card.get("flake_causes", [])}
    return {f["property_id"]: causes.get(f["property_id"], "(none)") for f in card.get("pair_flakes", [])}, seconds


def run_pairs(where: str, repo: Path, tmp: Path, pairs: int, *executor: str) -> tuple[list[dict[str, str]], float]:
    """`pairs` nightly pairs in a row, and their mean wall time."""
    found, total = [], 0.0
    for n in range(pairs):
        flakes, seconds = pair(repo, tmp / f"{where}-{n}", *executor)
        found.append(flakes)
        total += seconds
        print(f"{where} pair {n + 1}: {flakes or 'no flake'} in {seconds:.1f} s", file=sys.stderr)
    return found, total / pairs


def table(results: dict[str, tuple[list[dict[str, str]], float]]) -> None:
    print("| where | property | built with | established | named right | named otherwise |")
    print("|---|---|---|---:|---:|---|")
    wrong_total = 0
    for where, (found, _) in results.items():
        for pid, built in BUILT_WITH.items():
            named = Counter(flakes[pid] for flakes in found if pid in flakes)
            right = named.pop(built, 0)
            wrong_total += sum(named.values())
            other = ", ".join(f"{cause} x{k}" for cause, k in sorted(named.items())) or "-"
            print(f"| {where} | {pid} | {built} | {sum(named.values()) + right}/{len(found)} | {right} | {other} |")
    means = ", ".join(f"{where} {seconds:.1f} s" for where, (_, seconds) in results.items())
    print(f"\n{wrong_total} established flakes named otherwise; mean seconds per pair: {means}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--only", choices=("local", "celery"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="probegate-nightly-"))
    results: dict[str, tuple[list[dict[str, str]], float]] = {}
    try:
        repo = base_repo(tmp)
        if args.only in (None, "local"):
            results["local"] = run_pairs("local", repo, tmp, args.pairs)
        if args.only in (None, "celery"):
            with bench_fleet("nightly", "print('unused')\n", ["w1", "w2"]) as fleet:
                start_fleet(fleet.workers, ["w1", "w2"], {}, concurrency=1)
                broker = ("--broker", fleet.redis.url, "--workers", str(fleet.registry))
                results["celery"] = run_pairs("celery", repo, tmp, args.pairs, *broker)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
