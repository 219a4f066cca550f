"""`gate view` on a thousand cards: the time from starting the process to its runs page answered (every
card indexed), the same page again (from the cache), and the process's peak memory, each against a
baseline measured in the same run: `gate report` writing the Markdown summary of one card, the
smallest command that starts the gate and reads a card.

    .venv/bin/python -m benchmarks.view_start [--cards 1000] [--repeats 3]

The cards are copies of one mini-suite run (tests.support.mini_suite) under new run ids, days apart,
one folder each, with a contract row failed on every third; nothing runs in Docker.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

from gate.core.card.card import VerdictCard
from gate.core.verdicts.verdict import Kind
from gate.io.artifacts import write_card

GATE = Path(sys.executable).with_name("gate")
START_LIMIT_S = 2.0  # issue 41: gate view starts in under 2 s on 1,000 cards ...
MEMORY_LIMIT_MB = 200  # ... and stays under 200 MB


def one_card(folder: Path) -> VerdictCard:
    """A real card from one clean run of the mini suite."""
    os.environ.setdefault("PROBEGATE_STATE_DIR", str(folder / "state"))
    from tests.support.mini_suite import build_suite, good, run

    (folder / "suite").mkdir()
    result, _ = run(build_suite(folder / "suite"), good)
    return result.card


def write_cards(card: VerdictCard, folder: Path, n: int) -> None:
    for i in range(n):
        rows = card.properties
        if i % 3 == 0:
            rows = tuple(
                row.model_copy(update={"kind": Kind.FAIL_CONTRACT, "hits": 0}) if row.band == "contract" else row
                for row in rows
            )
        copy = card.model_copy(
            update={"run_id": f"run-{i:05d}", "created_at": card.created_at - timedelta(hours=i), "properties": rows}
        )
        write_card(folder / f"run-{i:05d}" / "card.json", copy)


def peak_mb(process: subprocess.Popen[str]) -> float:
    """The finished child's peak resident set (wait4's ru_maxrss, in KiB on Linux)."""
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0
    return usage.ru_maxrss / 1024


def baseline(card: Path, out: Path) -> tuple[float, float]:
    """Seconds and peak MB of `gate report CARD --summary-md OUT`."""
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    started = time.perf_counter()
    process = subprocess.Popen([str(GATE), "report", str(card), "--summary-md", str(out)], env=env, text=True)
    peak = peak_mb(process)
    return time.perf_counter() - started, peak


def view(cards: Path, state: Path) -> tuple[float, float, float]:
    """Seconds to the runs page answered, seconds for it again, and the process's peak MB."""
    env = {**os.environ, "PROBEGATE_STATE_DIR": str(state)}
    argv = [str(GATE), "view", "--cards", str(cards), "--port", "0"]
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().removeprefix("gate view: ").strip()
    with urllib.request.urlopen(url, timeout=60) as response:
        assert response.status == 200 and b"run-00000" in response.read()
    first = time.perf_counter() - started
    again = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
    second = time.perf_counter() - again
    process.terminate()
    return first, second, peak_mb(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=1000, help="how many cards (default 1000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each measurement; medians shown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="view-start-") as tmp:
        root = Path(tmp)
        card = one_card(root)
        write_cards(card, root / "cards", args.cards)
        size = sum(p.stat().st_size for p in (root / "cards").rglob("card.json")) / 1e6
        base = [baseline(root / "cards" / "run-00000" / "card.json", root / "summary.md") for _ in range(args.repeats)]
        runs = [view(root / "cards", root / "state") for _ in range(args.repeats)]
    base_s, base_mb = statistics.median(b[0] for b in base), statistics.median(b[1] for b in base)
    first_s, again_s = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    view_mb = statistics.median(r[2] for r in runs)
    print(f"{args.cards} cards, {size:.1f} MB; medians of {args.repeats}")
    print(f"gate report, one card (baseline)      {base_s:6.2f} s   peak {base_mb:6.1f} MB   ratio 1.00 / 1.00")
    print(
        f"gate view, start to runs page         {first_s:6.2f} s   peak {view_mb:6.1f} MB   "
        f"ratio {first_s / base_s:.2f} / {view_mb / base_mb:.2f}"
    )
    print(f"gate view, the runs page again        {again_s:6.2f} s")
    within = first_s < START_LIMIT_S and view_mb < MEMORY_LIMIT_MB
    print(f"issue 41's bounds (< {START_LIMIT_S:g} s, < {MEMORY_LIMIT_MB} MB): {'within' if within else 'OUTSIDE'}")


if __name__ == "__main__":
    main()
