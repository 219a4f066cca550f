"""Judging throughput: checks per second called in the coordinator's own process against the same
checks through the check process (`gate.io.checkproc`: a child bounded in time and memory, one
request and one answer per trial over a pipe), in one run.

The invoice example's five properties (two builtins, three functions of its checks module) judge a
well-formed observation of each in turn, as a run's trials arrive; the two ways alternate in
rounds and each reports the median of its rounds, so a busy machine moves both alike. Printed: both
rates, their ratio (child / in-process), what the child adds per check, and the child's start (a
fresh interpreter loading the checks), paid once per run and again after each kill.

    .venv/bin/python -m benchmarks.bench_check_judging [--checks 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

from gate.core.checks import Trial
from gate.core.suite.trial import Captured, ClockSpec, FileChange, Observation
from gate.core.verdicts.verdict import Band, OutcomeKind
from gate.io.checkproc import CheckProcess, InProcess, TrialJudge
from gate.io.checks import read_checks_module
from gate.io.suite import load_suite

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "invoice"
CLOCK = ClockSpec.model_validate({"frozen_at": "2026-03-01T00:00:00Z"})


def trials() -> list[tuple[str, Trial, Band]]:
    """One passing trial per property of the example: (property id, what the check sees, band)."""
    suite = load_suite(EXAMPLE / "gate.toml")
    made = []
    for prop in suite.properties:
        fixture = (EXAMPLE / "fixtures" / prop.fixture).read_bytes()
        invoice = json.loads(fixture)
        payload = {
            "invoice_id": "inv-001",
            "currency": "EUR",
            "net": "10.00",
            "tax": "2.10",
            "total": invoice.get("expected_total", "0"),
            "issued_at": "2026-03-01T00:00:00Z",
        }
        if "expected_tool" in invoice:
            payload = {"tool": invoice["expected_tool"]}
        data = json.dumps(payload).encode()
        obs = Observation(
            run_id="bench",
            property_id=prop.id,
            trial_index=0,
            exit_code=0,
            duration_s=0.03,
            stdout=Captured(data=data, length=len(data), sha256=hashlib.sha256(data).hexdigest()),
            writes=(FileChange(path="/work/out/invoice.json", change="created"),),
        )
        made.append((prop.id, Trial(obs, fixture, prop.params, CLOCK), prop.band))
    return made


def rate(judging: TrialJudge, work: list[tuple[str, Trial, Band]], checks: int) -> float:
    """Checks judged per second, `checks` of them, cycling through `work`; every one must hold."""
    started = time.perf_counter()
    for n in range(checks):
        prop, seen, band = work[n % len(work)]
        outcome = judging.judge(prop, seen, band)
        if outcome.kind is not OutcomeKind.HIT:
            raise SystemExit(f"{prop}: {outcome.kind} {outcome.detail}")
    return checks / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=5000, help="checks per round and way")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    suite = load_suite(EXAMPLE / "gate.toml")
    module = read_checks_module(suite.checks_path, {p.id: p.check for p in suite.properties}, suite_file="gate.toml")
    work = trials()
    here = InProcess(module.load())
    starts: list[float] = []
    local: list[float] = []
    child: list[float] = []
    for _ in range(args.rounds):
        local.append(rate(here, work, args.checks))
        started = time.perf_counter()
        with CheckProcess(module, deadline_s=5.0, memory_mb=1024) as there:
            there.judge(*work[0])  # the start: a fresh interpreter loads the checks before the first answer
            starts.append(time.perf_counter() - started)
            child.append(rate(there, work, args.checks))
    best_local, best_child = statistics.median(local), statistics.median(child)
    print(f"checks per round        {args.checks} ({len(work)} properties of examples/invoice in turn)")
    print(f"in-process (median)     {best_local:10,.0f} checks/s  (rounds: {_rates(local)})")
    print(f"check process (median)  {best_child:10,.0f} checks/s  (rounds: {_rates(child)})")
    print(f"ratio child/in-process  {best_child / best_local:10.2f}")
    print(f"added per check         {1e6 / best_child - 1e6 / best_local:10.1f} µs")
    print(f"child start (median)    {statistics.median(starts) * 1000:10.0f} ms  once per run, and after each kill")
    return 0


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{r:,.0f}" for r in rates)


if __name__ == "__main__":
    sys.exit(main())
