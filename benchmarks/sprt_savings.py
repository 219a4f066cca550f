"""Trials saved by the sequential band rule: SPRT against the smallest fixed-N test with the same
error rates, on simulated Bernoulli properties at true hit rates 0.5 to 0.95.

For p0 0.8, p1 0.6, alpha = beta = 0.05 the smallest fixed test is 43 of 60 (gate.core.verdicts.power finds it).
Each rate is simulated `--runs` times (seeded `random`) through the rule's own decisions, both for
Wald's classic test (checked after every trial, wave 1) and for the default waves of 5 the
coordinator dispatches; the exact figures from gate.core.verdicts.power's dynamic programme are printed beside
the simulated ones. The saving is the mean over p in {0.6, 0.8, 0.9} of 1 - E[trials] / 60.

    .venv/bin/python -m benchmarks.sprt_savings [--runs 10000] [--seed 20261201]
"""

from __future__ import annotations

import argparse
import math
import random
import time

from gate.core.verdicts.bands import FixedRule, SprtRule
from gate.core.verdicts.power import OCPoint, operating_characteristic, smallest_fixed_n

P0, P1, ALPHA, BETA, MAX_TRIALS = 0.8, 0.6, 0.05, 0.05, 120
RATES = [round(0.5 + 0.05 * i, 2) for i in range(10)]
SAVING_AT = (0.6, 0.8, 0.9)


def simulate(rule: SprtRule | FixedRule, rate: float, runs: int, rng: random.Random) -> tuple[float, float]:
    """Mean trials and pass fraction of `runs` simulated properties, decided by the rule itself."""
    decided: dict[tuple[int, int], tuple[bool, int]] = {}  # (hits, trials) -> (passed, next wave)

    def look(hits: int, trials: int) -> tuple[bool, int]:
        if (hits, trials) not in decided:
            decision = rule.decide(hits=hits, trials=trials)
            decided[hits, trials] = (decision.passed, 0 if decision.final else rule.next_wave(hits, trials))
        return decided[hits, trials]

    draw = rng.random
    total = passes = 0
    for _ in range(runs):
        hits = trials = 0
        passed, wave = look(0, 0)
        while wave:
            hits += sum(draw() < rate for _ in range(wave))
            trials += wave
            passed, wave = look(hits, trials)
        total += trials
        passes += passed
    return total / runs, passes / runs


def error_of(rate: float, p_pass: float) -> str:
    """The error a pass fraction means at this rate: missed pass at >= p0, false pass at <= p1."""
    if rate >= P0:
        return f"{1 - p_pass:.4f}"
    if rate <= P1:
        return f"{p_pass:.4f}"
    return "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = random.Random(args.seed)

    n, k = smallest_fixed_n(P0, P1, ALPHA, BETA)
    fixed = FixedRule(trials=n, min_hits=k)
    rules = {
        "sprt w=1": SprtRule(p0=P0, p1=P1, alpha=ALPHA, beta=BETA, max_trials=MAX_TRIALS, wave=1),
        "sprt w=5": SprtRule(p0=P0, p1=P1, alpha=ALPHA, beta=BETA, max_trials=MAX_TRIALS, wave=5),
    }
    print(f"p0 {P0}  p1 {P1}  alpha {ALPHA}  beta {BETA}  max_trials {MAX_TRIALS}  runs/rate {args.runs}")
    print(f"smallest fixed test with the same alpha, beta: pass at >= {k} of {n}")
    print("error = P(not pass) at rate >= p0, P(pass) at rate <= p1; sim = simulated, exact = gate.core.verdicts.power")
    print()
    head = f"{'rate':>5} | {'fixed ' + str(n) + ' err sim/exact':>24}"
    for name in rules:
        head += f" | {name + ' trials sim/exact':>27} {'err sim/exact':>15}"
    print(head)
    exact: dict[str, dict[float, OCPoint]] = {name: {} for name in rules}
    simulated: dict[str, dict[float, float]] = {name: {} for name in rules}
    for rate in RATES:
        _, fixed_pass = simulate(fixed, rate, args.runs, rng)
        fixed_exact = operating_characteristic(fixed, rate)
        row = f"{rate:>5.2f} | {error_of(rate, fixed_pass):>11} / {error_of(rate, fixed_exact.p_pass):>10}"
        for name, rule in rules.items():
            mean, p_pass = simulate(rule, rate, args.runs, rng)
            simulated[name][rate] = mean
            point = exact[name][rate] = operating_characteristic(rule, rate)
            row += f" | {mean:>13.2f} / {point.expected_trials:>9.2f}"
            row += f" {error_of(rate, p_pass):>7}/{error_of(rate, point.p_pass):<7}"
        print(row.rstrip())
    print()
    noise = 2 * math.sqrt(ALPHA * (1 - ALPHA) / args.runs)
    print(f"simulation noise (2 s.e. at an error of {ALPHA}): +/- {noise:.4f}")
    for name in rules:
        sim = sum(simulated[name][p] for p in SAVING_AT) / len(SAVING_AT)
        ex = sum(exact[name][p].expected_trials for p in SAVING_AT) / len(SAVING_AT)
        alpha_seen, beta_seen = 1 - exact[name][P0].p_pass, exact[name][P1].p_pass
        print(
            f"{name}: mean trials at p in {{0.6, 0.8, 0.9}} {sim:.2f} sim / {ex:.2f} exact vs {n} fixed: "
            f"saving {1 - sim / n:.1%} sim / {1 - ex / n:.1%} exact; exact errors {alpha_seen:.4f} at p0 "
            f"(alpha {ALPHA}), {beta_seen:.4f} at p1 (beta {BETA})"
        )
    print(f"elapsed {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
