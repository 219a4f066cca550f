"""gate.power: exact operating characteristics, the window effect, the smallest fixed test and `gate power`."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gate.core.verdicts.power as power
from gate.core.verdicts.bands import FixedRule, SprtRule
from gate.core.verdicts.power import (
    binomial_pmf,
    operating_characteristic,
    operating_characteristics,
    smallest_fixed_n,
    window_effect,
)

SPRT = SprtRule(p0=0.8, p1=0.6, alpha=0.05, beta=0.05, max_trials=120)
rates = st.floats(0.0, 1.0)
small_sprt = st.builds(
    SprtRule,
    p0=st.floats(0.6, 0.95),
    p1=st.floats(0.1, 0.55),
    max_trials=st.integers(40, 80),
    wave=st.integers(1, 12),
)
small_fixed = st.integers(1, 40).flatmap(lambda n: st.builds(FixedRule, trials=st.just(n), min_hits=st.integers(0, n)))


def test_fixed_eight_of_ten_at_point_eight_is_inconclusive_a_third_of_the_time():
    """The notes' 8 of 10 at a true rate of 0.8 is inconclusive with probability about 0.322."""
    point = operating_characteristic(FixedRule(), 0.8)
    assert point.p_inconclusive == pytest.approx(0.3222, abs=1e-4)
    assert (point.expected_trials, point.p95_trials) == (pytest.approx(10), 10)


def test_the_four_in_twenty_window_then_trips_82_percent_of_the_time():
    """With 0.322 inconclusive per verdict, more than 4 in 20 happens with probability about 0.82."""
    p = operating_characteristic(FixedRule(), 0.8).p_inconclusive
    assert window_effect(p, size=20, max_inconclusive=4) == pytest.approx(0.8227, abs=1e-4)


def test_smallest_fixed_test_for_the_issue_parameters_is_43_of_60():
    """For p0 .8, p1 .6, alpha = beta = .05 the smallest fixed test is n = 60, pass at >= 43."""
    assert smallest_fixed_n(0.8, 0.6, 0.05, 0.05) == (60, 43)


def test_smallest_fixed_test_meets_both_error_rates_and_59_cannot():
    """43 of 60 keeps both errors under 5%, and no threshold on 59 trials does."""
    at_p0, at_p1 = (
        operating_characteristic(FixedRule(trials=60, min_hits=43), 0.8),
        operating_characteristic(FixedRule(trials=60, min_hits=43), 0.6),
    )
    assert at_p0.p_inconclusive <= 0.05 and at_p1.p_pass <= 0.05
    ok = [
        k
        for k in range(60)
        if 1 - operating_characteristic(FixedRule(trials=59, min_hits=k), 0.8).p_pass <= 0.05
        and operating_characteristic(FixedRule(trials=59, min_hits=k), 0.6).p_pass <= 0.05
    ]
    assert ok == []


def test_sprt_meets_its_error_rates_and_saves_trials():
    """The default SPRT keeps both errors within alpha and beta and averages well under 60 trials."""
    pts = {p.rate: p for p in operating_characteristics(SPRT, [0.6, 0.8, 0.9])}
    assert pts[0.8].p_inconclusive <= 0.05
    assert pts[0.6].p_pass <= 0.05
    assert sum(p.expected_trials for p in pts.values()) / 3 < 0.6 * 60


def test_classic_sprt_saves_more_than_45_percent():
    """Checked after every trial (wave 1) the SPRT needs at least 45% fewer trials than 43 of 60."""
    rule = SprtRule(p0=0.8, p1=0.6, max_trials=120, wave=1)
    mean = sum(p.expected_trials for p in operating_characteristics(rule, [0.6, 0.8, 0.9])) / 3
    assert 1 - mean / 60 >= 0.45


@given(small_sprt, rates)
def test_sprt_probabilities_sum_to_one(rule, rate):
    """Pass, below-band and undecided are exhaustive and exclusive at every rate."""
    pt = operating_characteristic(rule, rate)
    assert pt.p_pass + pt.p_below + pt.p_undecided == pytest.approx(1.0, abs=1e-9)
    assert min(pt.p_pass, pt.p_below, pt.p_undecided) >= 0


@given(small_sprt, rates)
def test_sprt_trial_counts_stay_within_the_cap(rule, rate):
    """Expected and 95th-percentile trials lie between one wave and max_trials."""
    pt = operating_characteristic(rule, rate)
    assert min(rule.wave, rule.max_trials) <= pt.p95_trials <= rule.max_trials
    assert min(rule.wave, rule.max_trials) - 1e-9 <= pt.expected_trials <= rule.max_trials + 1e-9


@given(small_sprt, rates, rates)
def test_sprt_pass_probability_is_monotone_in_the_rate(rule, a, b):
    """A higher true rate never lowers the chance of passing."""
    lo, hi = sorted((a, b))
    assert operating_characteristic(rule, lo).p_pass <= operating_characteristic(rule, hi).p_pass + 1e-9


@given(st.builds(SprtRule, p0=st.floats(0.6, 0.95), p1=st.floats(0.1, 0.55), max_trials=st.integers(40, 80)))
def test_sprt_never_passes_at_rate_zero(rule):
    """At a true rate of 0 (no hit ever) the SPRT never passes."""
    assert operating_characteristic(rule, 0.0).p_pass == 0.0


@given(small_fixed, rates)
def test_fixed_rule_oc_is_the_binomial_tail(rule, rate):
    """For a fixed rule P(pass) is P(Bin(trials, rate) >= min_hits), computed independently."""
    n, k = rule.trials, rule.min_hits
    tail = sum(math.comb(n, j) * rate**j * (1 - rate) ** (n - j) for j in range(k, n + 1))
    pt = operating_characteristic(rule, rate)
    assert pt.p_pass == pytest.approx(tail, abs=1e-9)
    assert pt.p_undecided == 0
    assert (pt.expected_trials, pt.p95_trials) == (pytest.approx(n), n)


@given(st.integers(0, 300), rates)
def test_binomial_pmf_sums_to_one(n, p):
    """The binomial pmf is a distribution for every n and rate."""
    assert sum(binomial_pmf(n, p)) == pytest.approx(1.0, abs=1e-9)


@given(st.floats(0, 1), st.integers(1, 40), st.integers(0, 40))
def test_window_effect_is_a_probability_and_zero_past_the_window(p, size, budget):
    """The trip probability lies in [0, 1], and is 0 when the budget is at least the window."""
    trips = window_effect(p, size, budget)
    assert 0.0 <= trips <= 1.0
    if budget >= size:
        assert trips == 0.0


def test_power_module_does_not_import_matplotlib():
    """gate.power computes only: it imports no plotting library (gate.power_cli draws)."""
    tree = ast.parse(Path(power.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(name.startswith("matplotlib") for name in names)
