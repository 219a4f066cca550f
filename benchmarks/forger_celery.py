"""The forger beside an honest worker through the real thing, against the in-process model's prediction for
the same configuration and number of runs: `forger_statistical.py`'s figures, checked end to end.

A private redis-server, two enrolled `gate-worker`-speaking processes on real Docker: one honest
(`gate-worker serve`) and the stand-in the replay tests start (tests/support/servers.py), which reports the
expected tool on every tool-choice trial it runs (the model's `all` forger). The invoice example's
tree is patched so its tool choice is the expected one with probability `--rate` (0.75, just below the
band of 8 in 10), drawn from the trial's seed exactly as `tests.support.fleet_model.truth` draws it. Each
run is `python -m gate.cli run --broker --workers REGISTRY --property tool_choice_rate` with fresh seeds,
`--cross-check 0` and the default share interleaved; a row counts as accepted when its kind is pass.
The model runs the same row with the primaries batched and assigned as the coordinator sends them
(`forger_statistical.AssignedFleet`), and its prediction is printed with the binomial noise of N runs.

    .venv/bin/python -m benchmarks.forger_celery [--runs 15] [--rate 0.75] [--model-runs 4000]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from benchmarks.forger_statistical import DEFAULT_SHARE, RULE, AssignedFleet, exact_pass, measure
from gate.core.suite.plan import trial_seed
from tests.support.example_repo import EXAMPLE, example_repo
from tests.support.fleet_model import specs_for, truth
from tests.support.servers import RedisServer, Workers, enrol, start_statistical_liar

STAT = "tool_choice_rate"  # the invoice example's statistical property, the stand-in's target
SHARES = (("off (share 0)", 0.0), (f"default ({DEFAULT_SHARE})", DEFAULT_SHARE))
PATCH = "rate"


def patched_example(dest: Path, rate: float) -> Path:
    """A copy of the invoice example with one more patch, `rate`: the good tree whose tool choice is the
    expected tool with probability `rate`, drawn from the trial's seed (as `fleet_model.truth`)."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    api = dest / "patches" / PATCH / "invoicing" / "api.py"
    shutil.copytree(dest / "patches" / "good", api.parents[1])
    api.write_text(
        api.read_text()
        + f"""

def choose_tool(request, seed):
    # The benchmark's patch: the expected tool with probability {rate}, a draw from the trial's seed.
    import random

    hit = random.Random(seed).random() < {rate}
    return {{"tool": "issue_refund" if hit else "resend_invoice", "score": 1}}
"""
    )
    return dest


def one_run(repo, card: Path, url: str, registry: Path, share: float) -> dict:
    """One `gate run` of the statistical row over the broker; the card's row, cross-check and run id."""
    oracle = ("--suite", str(repo.suite), "--workdir", str(repo.app), "--seal", str(repo.seal), "--base", repo.base)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "gate.cli", "run", *oracle, "--retries", "0", "--card", str(card), "--new-ledger"),
            *("--broker", url, "--workers", str(registry), "--cross-check", str(share), "--property", STAT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if not card.exists():
        raise RuntimeError(f"gate run wrote no card (exit {done.returncode}): {done.stderr[-2000:]}")
    data = json.loads(card.read_text())
    row = next(r for r in data["properties"] if r["id"] == STAT)
    return {"row": row, "cross_check": data["cross_check"], "run_id": data["run_id"]}


def true_hits(run_id: str, rate: float) -> int:
    """The row's hits as honest workers see them: the probe's draw from each planned trial's seed."""
    seeded = truth(rate)
    return sum(seeded(SimpleNamespace(seed=trial_seed(run_id, STAT, i))) for i in range(RULE.trials))  # type: ignore[arg-type]


def model_split() -> dict[str, int]:
    """Primary trials per worker in the model's row (AssignedFleet, two worker processes)."""
    fleet = AssignedFleet({"honest1": lambda s, w: True, "liar": lambda s, w: True}, None, processes=2)  # type: ignore[arg-type]
    ran = Counter(obs.worker_id for obs in fleet.run(specs_for("x", RULE), None))
    return dict(sorted(ran.items()))


def band(p: float, n: int) -> tuple[float, float]:
    """p +/- two standard errors of a rate over n runs, clipped to [0, 1]."""
    half = 2 * math.sqrt(p * (1 - p) / n)
    return max(0.0, p - half), min(1.0, p + half)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="real runs per configuration")
    parser.add_argument("--rate", type=float, default=0.75, help="the patch's true hit rate (band: 0.8)")
    parser.add_argument("--model-runs", type=int, default=4000, help="in-process runs per configuration")
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument("--keep", action="store_true", help="keep the cards and logs (the folder is printed)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="probegate-forger-"))
    redis = RedisServer(tmp / "redis")
    redis.start()
    workers = Workers(redis.url, tmp)
    results: dict[float, list[dict]] = {share: [] for _, share in SHARES}
    took: dict[float, list[float]] = {share: [] for _, share in SHARES}
    try:
        registry = tmp / "workers.json"
        enrol(workers, registry, "honest", "liar")
        workers.start("honest")
        start_statistical_liar(workers, "liar")
        workers.wait_ready()
        repo = example_repo(tmp / "repo", PATCH, source=patched_example(tmp / "example", args.rate))
        for n in range(args.runs):
            # Interleaved, the order swapped every run, so a busy stretch of the machine hits both alike.
            order = SHARES if n % 2 == 0 else SHARES[::-1]
            for _, share in order:
                started = time.perf_counter()
                card = tmp / f"s{share}" / f"{n}" / "card.json"
                results[share].append(one_run(repo, card, redis.url, registry, share))
                took[share].append(time.perf_counter() - started)
                got = results[share][-1]
                print(
                    f"  run {n + 1}/{args.runs} share {share}: {got['row']['kind']}, {got['row']['hits']} hits "
                    f"(true {true_hits(got['run_id'], args.rate)}), {took[share][-1]:.1f}s",
                    file=sys.stderr,
                )
    finally:
        workers.stop_all()
        redis.stop()
        if args.keep:
            print(f"cards and logs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"band {RULE.min_hits}/{RULE.trials}, true rate {args.rate}, enrolled box-honest + box-liar (a hit on "
        f"every statistical trial it runs), {args.runs} real runs a line; exact honest pass rate "
        f"{exact_pass(args.rate):.3f}"
    )
    print(
        f"{'replays':<16}{'real':>7}{'model':>8}{'model +/- 2 s.e. at N':>24}{'agree':>7}"
        f"{'lie-made real/model':>21}{'replays/primary real/model':>28}{'s/run':>7}"
    )
    for label, share in SHARES:
        rows = results[share]
        passed = [r["row"]["kind"] == "pass" for r in rows]
        real = sum(passed) / len(rows)
        lies = [ok and true_hits(r["run_id"], args.rate) < RULE.min_hits for ok, r in zip(passed, rows, strict=True)]
        lie_made = sum(lies) / len(rows)
        replays = sum(r["cross_check"].get("replays_chosen", 0) for r in rows) / (RULE.trials * len(rows))
        model, model_lie, model_extra = measure("all", args.rate, 2, share, args.model_runs, args.seed, processes=2)
        low, high = band(model, len(rows))
        agree = "yes" if low <= real <= high else "NO"
        print(
            f"{label:<16}{real:>7.3f}{model:>8.3f}{f'{low:.3f}-{high:.3f}':>24}{agree:>7}"
            f"{f'{lie_made:.3f}/{model_lie:.3f}':>21}{f'{replays:.2f}/{model_extra:.2f}':>28}"
            f"{statistics.median(took[share]):>7.1f}"
        )
    splits = {json.dumps(r["row"].get("assigned"), sort_keys=True) for rows in results.values() for r in rows}
    print(f"primary trials per worker (card's assigned): {'; '.join(sorted(splits))}; model: {model_split()}")
    honest, _, _ = measure("honest", args.rate, 2, DEFAULT_SHARE, args.model_runs, args.seed, processes=2)
    print(f"model, all honest: {honest:.3f} (the same with replays on or off)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
