"""The paired rule's operating characteristic: exact figures (gate.core.verdicts.paired_power) for the
issue's example, and a seeded simulation through the rule's own waves and states that must agree with them.

The simulation is seeded, so it gives the same numbers every run and cannot fail by luck; its
tolerance is also a Chernoff bound (KL form) for its number of runs, so with any other seed all its
assertions together would still fail with probability below 1e-9.
"""

from __future__ import annotations

import math
import random

import pytest

from gate.core.verdicts.bands import FixedRule
from gate.core.verdicts.paired import PairCounts, PairedRule, PairedState
from gate.core.verdicts.paired_power import PairLaw, paired_characteristic
from gate.core.verdicts.power import operating_characteristic

ISSUE = PairedRule(margin=0.05, alpha=0.05, beta=0.05, max_pairs=400)
RUNS = 2000
CHECKS = 12  # simulated probabilities compared below; the 1e-9 is shared among them
FLAKE = 1e-9


def _kl(q: float, p: float) -> float:
    """KL divergence of Bernoulli(q) from Bernoulli(p)."""
    total = 0.0
    for x, y in ((q, p), (1 - q, 1 - p)):
        if x > 0:
            total += x * math.log(x / y) if y > 0 else math.inf
    return total


def chernoff_margin(p: float, runs: int, flake: float) -> float:
    """The smallest eps with P(|mean of `runs` Bernoulli(p)| - p| >= eps) <= flake by Chernoff's bound."""

    def tail(q: float) -> float:  # a share beyond [0, 1] never happens
        return math.exp(-runs * _kl(q, p)) if 0.0 <= q <= 1.0 else 0.0

    eps = 1e-4
    while tail(p + eps) + tail(p - eps) > flake:
        eps += 1e-4
    return eps


def simulate(rule: PairedRule, law: PairLaw, runs: int, rng: random.Random) -> dict[PairedState, float]:
    """The share of `runs` simulated properties ending in each state, each decided by the rule's own
    `next_wave` and `state` at wave ends (as the coordinator asks)."""
    cells = [0, 1, 2]  # agree, patch-only, base-only
    weights = [max(0.0, 1 - law.patch_only - law.base_only), law.patch_only, law.base_only]
    ends = dict.fromkeys(PairedState, 0)
    for _ in range(runs):
        agree = up = down = 0
        counts = PairCounts()
        while wave := rule.next_wave(counts):
            for cell in rng.choices(cells, weights, k=wave):
                if cell == 0:
                    agree += 1
                elif cell == 1:
                    up += 1
                else:
                    down += 1
            # Valid by construction: unvalidated counts are a third of the simulation's time.
            counts = PairCounts.model_construct(both_pass=agree, patch_only=up, base_only=down, both_fail=0)
        ends[rule.state(counts)] += 1
    return {state: n / runs for state, n in ends.items()}


def test_the_issues_worse_patch_is_blocked_and_the_fixed_band_passes_it():
    """Base .95, patch .85, margin .05, alpha = beta = .05, 400 pairs: passes under 1% of the time
    whatever the coupling, while 8 of 10 passes the .85 patch 82% of the time."""
    for law in (PairLaw.independent(0.95, 0.85), PairLaw.shared(0.95, 0.85)):
        point = paired_characteristic(ISSUE, law)
        assert point.p_pass < 0.01
        assert point.p_worse > 0.99
        assert point.dropped < 1e-8
    assert operating_characteristic(FixedRule(trials=10, min_hits=8), 0.85).p_pass == pytest.approx(0.8202, abs=1e-4)


def test_an_equal_patch_passes_when_the_seed_pairs_the_trials():
    """A patch equal to the base, trials paired by their seed: no disagreement, a pass at the wave after 58 pairs."""
    point = paired_characteristic(ISSUE, PairLaw.shared(0.95, 0.95))
    assert (point.p_pass, point.expected_pairs) == (1.0, 60.0)


def test_error_rates_hold_with_independent_pairs_given_enough_pairs():
    """With independent pairs (the most disagreement) at base .9, margin .1 and 400 pairs: an equal
    patch fails under alpha, a patch worse by the margin passes under beta."""
    rule = PairedRule(margin=0.1, alpha=0.05, beta=0.05, max_pairs=400)
    equal = paired_characteristic(rule, PairLaw.independent(0.9, 0.9))
    at_margin = paired_characteristic(rule, PairLaw.independent(0.9, 0.8))
    assert equal.p_inconclusive <= rule.alpha
    assert at_margin.p_pass <= rule.beta


def test_at_the_margin_wald_bounds_hold_to_within_a_hundredth():
    """At exactly d = -margin with shared pairs the pass rate is Wald's approximate beta (0.0515 here)."""
    point = paired_characteristic(ISSUE, PairLaw.shared(0.95, 0.90))
    assert point.p_pass <= ISSUE.beta + 0.01


def test_400_pairs_leave_an_equal_independent_patch_undecided_one_time_in_seven():
    """The issue's cap is short for independent pairs at .95: undecided 13.9% of the time (docs say so)."""
    point = paired_characteristic(ISSUE, PairLaw.independent(0.95, 0.95))
    assert point.p_undecided == pytest.approx(0.1388, abs=1e-3)
    assert point.p_worse <= ISSUE.alpha


SCENARIOS = [
    (PairLaw.independent(0.95, 0.85), ISSUE),
    (PairLaw.shared(0.95, 0.90), ISSUE),
    (PairLaw.independent(0.9, 0.9), PairedRule(margin=0.1, max_pairs=200, wave=5)),
    (PairLaw.independent(0.7, 0.75), PairedRule(margin=0.1, max_pairs=300, wave=20)),
]


@pytest.mark.parametrize(("law", "rule"), SCENARIOS)
def test_simulation_agrees_with_the_exact_characteristic(law, rule):
    """Seeded runs through the rule's own waves land within a Chernoff margin of the exact pass,
    worse and undecided probabilities (flake below 1e-9 over all CHECKS comparisons, whatever the seed)."""
    simulated = simulate(rule, law, RUNS, random.Random(20261205))
    exact = paired_characteristic(rule, law)
    for state, p in ((PairedState.PASS, exact.p_pass), (PairedState.WORSE, exact.p_worse),
                     (PairedState.UNDECIDED, exact.p_undecided)):  # fmt: skip
        assert abs(simulated[state] - p) <= chernoff_margin(p, RUNS, FLAKE / CHECKS), (state, simulated[state], p)
