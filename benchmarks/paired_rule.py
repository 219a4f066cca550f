"""Trials spent and wrong decisions of the paired rule against the fixed and SPRT bands, on simulated
probes at several true base rates and patch-minus-base differences.

Each property is simulated `--runs` times (seeded `random`), decided by each rule's own waves and
states, as the coordinator asks them:

- `fixed 8/10`: the notes' default band, 10 patched trials, pass at 8 hits;
- `sprt@base`: Wald's SPRT with p0 = the true base rate and p1 = p0 - margin, alpha = beta = .05 and a
  cap of 2 * max_pairs trials: the best an absolute band can do, since it is told the base's true rate;
- `sprt stale`: the same SPRT with p0 one margin below the true base rate (a band set while the base
  was worse, never raised): what an absolute band does once the base moves;
- `paired ind` / `paired shr`: the paired rule (margin .05, alpha = beta = .05, max_pairs 400), each pair
  costing two trials (base and patch), with the two sides independent or sharing their seed's draw.

A decision is wrong when a patch no worse than the base (difference >= 0) does not pass, or a patch worse
by the margin or more (difference <= -margin) passes; between the two nothing is wrong. The trial ratio
is each rule's mean trials over the SPRT band's, measured in the same run.

    .venv/bin/python -m benchmarks.paired_rule [--runs 2000] [--seed 20261205]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable

from gate.core.verdicts.bands import FixedRule, SprtRule
from gate.core.verdicts.paired import PairCounts, PairedRule, PairedState
from gate.core.verdicts.paired_power import PairLaw

MARGIN, ALPHA, BETA, MAX_PAIRS = 0.05, 0.05, 0.05, 400
BASE_RATES = (0.95, 0.8, 0.6)
DIFFERENCES = (0.05, 0.0, -0.05, -0.10)

Outcome = tuple[bool, int]  # (passed, trials spent)


def band(rule: FixedRule | SprtRule, rate: float, rng: random.Random) -> Outcome:
    """One property decided by a band rule on the patched tree's trials alone."""
    hits = trials = 0
    while wave := rule.next_wave(hits, trials):
        hits += sum(rng.random() < rate for _ in range(wave))
        trials += wave
    return rule.decide(hits=hits, trials=trials).passed, trials


def paired(rule: PairedRule, law: PairLaw, rng: random.Random) -> Outcome:
    """One property decided by the paired rule; each pair costs a base trial and a patched trial."""
    weights = [max(0.0, 1 - law.patch_only - law.base_only), law.patch_only, law.base_only]
    cells = [0, 0, 0]  # agree, patch-only, base-only
    counts = PairCounts()
    while wave := rule.next_wave(counts):
        for cell in rng.choices((0, 1, 2), weights, k=wave):
            cells[cell] += 1
        counts = PairCounts(both_pass=cells[0], patch_only=cells[1], base_only=cells[2])
    return rule.state(counts) is PairedState.PASS, 2 * counts.pairs


def wrong(difference: float, passed: bool) -> bool:
    if difference >= 0:
        return not passed
    if difference <= -MARGIN + 1e-12:
        return passed
    return False


def measure(decide: Callable[[random.Random], Outcome], difference: float, runs: int, rng: random.Random):
    """Mean trials, pass share and wrong-decision share of `runs` simulated properties."""
    trials = passes = errors = 0
    for _ in range(runs):
        passed, spent = decide(rng)
        trials += spent
        passes += passed
        errors += wrong(difference, passed)
    return trials / runs, passes / runs, errors / runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261205)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = random.Random(args.seed)
    fixed = FixedRule(trials=10, min_hits=8)
    rule = PairedRule(margin=MARGIN, alpha=ALPHA, beta=BETA, max_pairs=MAX_PAIRS)
    print(f"margin {MARGIN}  alpha {ALPHA}  beta {BETA}  max_pairs {MAX_PAIRS}  runs/case {args.runs}")
    print("per rule: mean trials (ratio to sprt@base) / P(pass) / P(wrong)")
    names = ("fixed 8/10", "sprt@base", "sprt stale", "paired ind", "paired shr")
    print(f"{'base':>5} {'diff':>6} | " + " | ".join(f"{name:^25}" for name in names))
    totals = {name: [0.0, 0.0, 0] for name in names}  # trials, wrong, cases with a right answer
    for base_rate in BASE_RATES:
        sprt = SprtRule(p0=base_rate, p1=base_rate - MARGIN, alpha=ALPHA, beta=BETA, max_trials=2 * MAX_PAIRS)
        stale = sprt.model_copy(update={"p0": base_rate - MARGIN, "p1": base_rate - 2 * MARGIN})
        for difference in DIFFERENCES:
            patch_rate = min(1.0, base_rate + difference)
            diff = round(patch_rate - base_rate, 10)
            deciders: dict[str, Callable[[random.Random], Outcome]] = {
                "fixed 8/10": lambda r, p=patch_rate: band(fixed, p, r),
                "sprt@base": lambda r, p=patch_rate, s=sprt: band(s, p, r),
                "sprt stale": lambda r, p=patch_rate, s=stale: band(s, p, r),
                "paired ind": lambda r, b=base_rate, p=patch_rate: paired(rule, PairLaw.independent(b, p), r),
                "paired shr": lambda r, b=base_rate, p=patch_rate: paired(rule, PairLaw.shared(b, p), r),
            }
            results = {name: measure(decide, diff, args.runs, rng) for name, decide in deciders.items()}
            baseline = results["sprt@base"][0]
            cells = []
            for name, (trials, p_pass, p_wrong) in results.items():
                shown_wrong = f"{p_wrong:.3f}" if diff >= 0 or diff <= -MARGIN + 1e-12 else "  -  "
                cells.append(f"{trials:6.1f} ({trials / baseline:4.2f}) {p_pass:.3f} {shown_wrong}")
                totals[name][0] += trials / baseline
                if diff >= 0 or diff <= -MARGIN + 1e-12:
                    totals[name][1] += p_wrong
                    totals[name][2] += 1
            print(f"{base_rate:>5.2f} {diff:>+6.2f} | " + " | ".join(f"{cell:^25}" for cell in cells))
    cases = len(BASE_RATES) * len(DIFFERENCES)
    print()
    for name, (ratio, errors, judged) in totals.items():
        print(f"{name:>10}: mean trial ratio to sprt@base {ratio / cases:.2f}; mean P(wrong) {errors / judged:.3f}")
    print(f"simulation noise (2 s.e. at P = {ALPHA}): +/- {2 * math.sqrt(ALPHA * (1 - ALPHA) / args.runs):.4f}")
    print(f"elapsed {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
