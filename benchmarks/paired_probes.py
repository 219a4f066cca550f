"""Trials spent and wrong decisions of the paired rule against a fixed band and an SPRT band, on real probes:
the invoice example's paired suite (examples/invoice/paired.toml) run by `gate run --base` through the local
pool and the real sandbox, `--runs` times per patch, each run with its own trial seeds.

The base routes the refund query right about 0.95 of the time. Two patches:

- `slips` samples hotter (about 0.85): worse than the base by more than the 0.05 margin, so passing it is
  a wrong decision;
- `same_rate` refactors without touching the odds: no worse, so blocking it is a wrong decision.

Three rules judge the same probe in the same run (one property each): the paired rule (margin 0.05,
alpha = beta = 0.05, at most 400 pairs, each pair a base trial and a patched trial), the fixed band of 8
hits in 10, and an SPRT band (p0 0.95, p1 0.90, alpha = beta = 0.05, at most 400 trials) that is told the
base's true rate, which an author setting a band by hand seldom knows. Trial ratios are each rule's mean
trials over the SPRT band's, measured in the same run.

    .venv/bin/python -m benchmarks.paired_probes [--runs 5]
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
from pathlib import Path

from tests.support.example_repo import EXAMPLE, example_repo

PAIRED, BAND, SPRT = "routing_no_worse_than_base", "routing_band_8_of_10", "routing_sprt_at_base"
SPRT_PROPERTY = f"""
[[property]]
id = "{SPRT}"
band = "statistical"
fixture = "tools/refund-query.json"
check = "checks:tool_choice"
deadline_s = 5.0
rule = "sprt"
p0 = 0.95
p1 = 0.90
alpha = 0.05
beta = 0.05
max_trials = 400
wave = 20
"""
WORSE = {"paired/slips": True, "paired/same_rate": False}  # is the patch worse than the base by the margin?


def example_with_sprt(tmp: Path) -> Path:
    """A copy of the example whose paired suite also holds the SPRT band."""
    source = tmp / "example"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns(".probegate", "__pycache__"))
    suite = source / "paired.toml"
    suite.write_text(suite.read_text() + SPRT_PROPERTY)
    return source


def one_run(source: Path, patch: str, where: Path, seeds: str) -> tuple[dict[str, dict], float]:
    """The card's rows of one `gate run --base` of `patch`, by property id, and the run's wall time."""
    repo = example_repo(where / "repo", patch, source=source)
    card = where / "card.json"
    argv = [
        *(sys.executable, "-m", "gate.cli", "run"),
        *("--suite", str(repo.root / "paired.toml"), "--workdir", str(repo.app)),
        *("--seal", str(repo.seal), "--base", repo.base, "--card", str(card), "--new-ledger"),
        *("--replay-seeds", seeds),
    ]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env={**os.environ})
    took = time.monotonic() - started
    if not card.exists():
        raise SystemExit(f"gate run wrote no card for {patch}:\n{done.stderr[-2000:]}")
    return {row["id"]: row for row in json.loads(card.read_text())["properties"]}, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per patch (default 5)")
    args = parser.parse_args()
    tallies: dict[tuple[str, str], list[tuple[bool, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="probegate-paired-bench-") as tmp:
        source = example_with_sprt(Path(tmp))
        os.environ.setdefault("PROBEGATE_STATE_DIR", str(Path(tmp) / "state"))
        for patch in WORSE:
            for run in range(args.runs):
                rows, took = one_run(source, patch, Path(tmp) / f"{patch.replace('/', '-')}-{run}", f"bench-{run}")
                for pid in (PAIRED, BAND, SPRT):
                    row = rows[pid]
                    # A pair is two trials (base and patch); the card's `trials` counts the patch's.
                    spent = row["trials"] * (2 if pid == PAIRED else 1)
                    tallies.setdefault((patch, pid), []).append((row["kind"] == "pass", spent))
                print(f"  {patch} run {run + 1}/{args.runs}: {took:.1f} s", file=sys.stderr, flush=True)
    print(f"paired rule vs bands on the invoice example's real probe, {args.runs} runs per patch")
    print(f"{'patch':18} {'rule':28} {'passed':>7} {'wrong':>6} {'mean trials':>12} {'vs sprt':>8}")
    for patch, worse in WORSE.items():
        sprt_mean = sum(t for _, t in tallies[(patch, SPRT)]) / args.runs
        for pid in (PAIRED, BAND, SPRT):
            outcomes = tallies[(patch, pid)]
            passed = sum(p for p, _ in outcomes)
            wrong = passed if worse else args.runs - passed
            mean = sum(t for _, t in outcomes) / args.runs
            print(f"{patch:18} {pid:28} {passed:>7} {wrong:>6} {mean:>12.1f} {mean / sprt_mean:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
