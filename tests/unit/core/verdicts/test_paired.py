"""gate.core.verdicts.paired: the paired rule's statistic, bounds, states, waves and estimate."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from gate.core.verdicts.bands import FixedRule, SprtRule
from gate.core.verdicts.paired import AnyRule, PairCounts, PairedRule, PairedState, profile_loglik

RULE = PairedRule(margin=0.05, alpha=0.05, beta=0.05, max_pairs=400)

paired_rules = st.builds(
    PairedRule,
    margin=st.floats(0.02, 0.3),
    alpha=st.floats(0.01, 0.2),
    beta=st.floats(0.01, 0.2),
    max_pairs=st.just(2000),
    wave=st.integers(1, 20),
)
pair_counts = st.builds(
    PairCounts,
    both_pass=st.integers(0, 300),
    both_fail=st.integers(0, 100),
    base_only=st.integers(0, 60),
    patch_only=st.integers(0, 60),
)


def _searched_loglik(counts: PairCounts, mean: float) -> float:
    """The profile log-likelihood by ternary search over q+ (the log-likelihood is concave in it): an
    independent check of the closed form."""
    a, b, c = counts.patch_only, counts.base_only, counts.both_pass + counts.both_fail

    def loglik(t: float) -> float:
        probs = (t, t - mean, 1 + mean - 2 * t)
        if any(p <= 0 and k for p, k in zip(probs, (a, b, c), strict=True)):
            return -math.inf
        return sum(k * math.log(p) for p, k in zip(probs, (a, b, c), strict=True) if k)

    low, high = max(0.0, mean), (1 + mean) / 2
    for _ in range(200):
        left, right = low + (high - low) / 3, high - (high - low) / 3
        if loglik(left) < loglik(right):
            low = left
        else:
            high = right
    return max(loglik(low), loglik(high), loglik(max(0.0, mean)), loglik((1 + mean) / 2))


def test_bounds_are_walds():
    """A = log((1-beta)/alpha) and B = log(beta/(1-alpha)), about ±2.944 at alpha = beta = .05."""
    assert RULE.upper == pytest.approx(math.log(0.95 / 0.05))
    assert RULE.lower == pytest.approx(-2.9444, abs=1e-4)


@given(pair_counts, st.sampled_from([0.0, -0.05, -0.2, -0.5]))
def test_profile_loglik_is_the_maximum_over_the_trinomial(counts, mean):
    """The closed-form constrained maximum matches a ternary search over the trinomial."""
    exact = profile_loglik(counts, mean)
    searched = _searched_loglik(counts, mean)
    assert exact == pytest.approx(searched, abs=1e-7 * max(1.0, abs(searched)))


def test_agreeing_pairs_pass_after_n_log_one_minus_margin_reaches_b():
    """With no disagreement llr = n log(1 - margin): 58 pairs pass at margin .05, 57 do not."""
    assert RULE.llr(PairCounts(both_pass=10)) == pytest.approx(10 * math.log(0.95))
    assert RULE.pairs_to_pass() == 58
    assert RULE.state(PairCounts(both_pass=40, both_fail=18)) is PairedState.PASS
    assert RULE.state(PairCounts(both_pass=57)) is PairedState.CONTINUE


def test_a_patch_losing_a_tenth_of_its_hits_is_worse():
    """Base .95, patch .85 observed over 100 pairs (10 base-only, 0 patch-only) is decided worse."""
    counts = PairCounts(both_pass=85, base_only=10, both_fail=5)
    decision = RULE.decide(counts)
    assert decision.state is PairedState.WORSE and decision.final and not decision.passed
    assert decision.difference == pytest.approx(-0.10)
    assert "worse than the base by 0.05" in decision.reason


def test_undecided_at_max_pairs_is_final_and_not_passed():
    """Between the bounds at max_pairs the rule is undecided: final, not passed, no more pairs."""
    rule = PairedRule(margin=0.05, max_pairs=100)
    counts = PairCounts(both_pass=80, base_only=10, patch_only=8, both_fail=2)
    decision = rule.decide(counts)
    assert decision.state is PairedState.UNDECIDED and decision.final and not decision.passed
    assert "undecided at max_pairs 100" in decision.reason
    assert rule.next_wave(counts) == 0


def test_next_wave_is_one_wave_cut_to_the_cap():
    """While open the coordinator dispatches one wave of pairs, cut so the total never exceeds max_pairs."""
    rule = PairedRule(margin=0.05, max_pairs=65, wave=10)
    assert rule.next_wave(PairCounts()) == 10
    assert rule.next_wave(PairCounts(both_pass=50, base_only=5, patch_only=5)) == 5
    assert rule.planned_trials() == 65


@given(paired_rules, pair_counts)
def test_next_wave_is_positive_exactly_when_not_final(rule, counts):
    """The coordinator's two questions agree: more pairs are dispatched exactly when the state continues."""
    assert (rule.next_wave(counts) > 0) == (not rule.decide(counts).final)


@given(paired_rules, pair_counts)
def test_turning_a_base_only_pair_into_a_patch_only_one_never_hurts(rule, counts):
    """The statistic falls when the patch does better on a pair: a pass stays a pass, a worse may lift."""
    if counts.base_only == 0:
        return
    better = counts.model_copy(update={"base_only": counts.base_only - 1, "patch_only": counts.patch_only + 1})
    assert rule.llr(better) <= rule.llr(counts) + 1e-9


@given(paired_rules, pair_counts)
def test_a_patch_that_never_does_worse_is_never_called_worse(rule, counts):
    """Without a single base-only pair the patch is never worse than the base."""
    assert rule.state(counts.model_copy(update={"base_only": 0})) is not PairedState.WORSE


@given(paired_rules, st.integers(0, 400))
def test_a_patch_that_never_does_better_and_keeps_losing_is_never_passed(rule, n):
    """Only base-only pairs (the patch missed every time the base held) never pass."""
    assert rule.state(PairCounts(base_only=n)) is not PairedState.PASS


@given(pair_counts)
def test_the_interval_holds_the_estimate_and_lies_in_minus_one_one(counts):
    """Bonett-Price's interval lies in [-1, 1] and is named by its method."""
    interval = counts.interval()
    assert -1.0 <= interval.low <= interval.high <= 1.0
    assert interval.method == "bonett-price"
    if counts.pairs >= 20:
        assert interval.low - 1e-9 <= counts.difference <= interval.high + 1e-9


@pytest.mark.parametrize(
    "kwargs",
    [{"margin": 0.0}, {"margin": 0.6}, {"alpha": 0.5}, {"beta": 0.0}, {"max_pairs": 0}, {"max_pairs": 57},
     {"wave": 0}, {"extra": 1}, {"margin": float("nan")}],
)  # fmt: skip
def test_paired_rule_refuses_bad_parameters(kwargs):
    """A margin outside (0, .5], alpha/beta outside (0, .5), a cap too small to pass, wave 0, extras: refused."""
    with pytest.raises(ValidationError):
        PairedRule(**{"margin": 0.05, "max_pairs": 400, **kwargs})


def test_any_rule_reads_back_every_rule_by_its_tag():
    """A card's rule dict reads back to FixedRule, SprtRule or PairedRule by its `rule` tag."""
    adapter = TypeAdapter(AnyRule)
    assert adapter.validate_python(RULE.model_dump()) == RULE
    assert isinstance(adapter.validate_python({"rule": "fixed"}), FixedRule)
    assert isinstance(adapter.validate_python({"rule": "sprt", "p0": 0.8, "p1": 0.6, "max_trials": 50}), SprtRule)


def test_pair_counts_of_pairs():
    """(base held, patch held) pairs are counted into the four cells."""
    counts = PairCounts.of([(True, True), (True, False), (False, True), (False, False), (True, True)])
    assert counts == PairCounts(both_pass=2, base_only=1, patch_only=1, both_fail=1)
    assert (counts.pairs, counts.discordant, counts.difference) == (5, 2, 0.0)
