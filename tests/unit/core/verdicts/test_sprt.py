"""gate.bands.SprtRule: Wald's sequential test, its boundaries, waves and the shared rule interface."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from gate.core.verdicts.bands import BandDecision, BandRule, FixedRule, SprtRule
from gate.core.verdicts.verdict import Band, Kind, Outcome, OutcomeKind, fold

RULE = SprtRule(p0=0.8, p1=0.6, alpha=0.05, beta=0.05, max_trials=120)

sprt_rules = st.builds(
    SprtRule,
    p0=st.floats(0.55, 0.95),
    p1=st.floats(0.05, 0.5),
    alpha=st.floats(0.01, 0.2),
    beta=st.floats(0.01, 0.2),
    max_trials=st.integers(60, 200),
    wave=st.integers(1, 15),
)
counts = st.integers(0, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


def test_boundaries_are_walds():
    """A = log((1-beta)/alpha) and B = log(beta/(1-alpha)), about ±2.944 at alpha = beta = 0.05."""
    assert RULE.upper == pytest.approx(math.log(0.95 / 0.05))
    assert RULE.lower == pytest.approx(math.log(0.05 / 0.95))
    assert RULE.upper == pytest.approx(2.9444, abs=1e-4)


def test_llr_is_h1_against_h0():
    """The statistic is the log-likelihood ratio of H1 (rate p1) against H0 (rate p0)."""
    hits, trials = 7, 10
    expected = math.log((0.6**7 * 0.4**3) / (0.8**7 * 0.2**3))
    assert RULE.llr(hits, trials) == pytest.approx(expected)


def test_eleven_straight_hits_pass_and_ten_do_not():
    """At p0 .8, p1 .6, alpha = beta = .05 eleven straight hits pass; ten are not enough."""
    assert RULE.trials_to_pass() == 11
    assert RULE.decide(hits=11, trials=11).passed
    assert RULE.decide(hits=10, trials=10) == BandDecision(
        passed=False, reason="10/10 hits, undecided before max_trials 120", final=False
    )


def test_five_straight_misses_are_below_the_band():
    """Five misses push the statistic past A: decided below the band, final, not passed."""
    decision = RULE.decide(hits=0, trials=5)
    assert (decision.passed, decision.final) == (False, True)
    assert "rate <= 0.6" in decision.reason


def test_undecided_at_max_trials_is_final_and_not_passed():
    """At max_trials an undecided statistic is final, does not pass, and says so."""
    rule = SprtRule(p0=0.8, p1=0.6, max_trials=20)
    decision = rule.decide(hits=14, trials=20)
    assert (decision.passed, decision.final) == (False, True)
    assert "undecided at max_trials" in decision.reason
    assert rule.state(14, 20) == "undecided"
    assert rule.next_wave(14, 20) == 0


def test_next_wave_is_one_wave_cut_to_the_cap():
    """While open the coordinator dispatches one wave, cut so the total never exceeds max_trials."""
    rule = SprtRule(p0=0.8, p1=0.6, max_trials=25, wave=10)
    assert rule.next_wave(0, 0) == 10
    assert rule.next_wave(15, 20) == 5
    assert rule.planned_trials() == 25


def test_next_wave_is_zero_once_decided():
    """A decided property gets no more trials."""
    assert RULE.next_wave(20, 20) == 0
    assert RULE.next_wave(0, 10) == 0


@given(sprt_rules, counts)
def test_next_wave_is_positive_exactly_when_not_final(rule, hn):
    """The coordinator's two questions agree: more trials are dispatched exactly when not final."""
    hits, trials = hn
    assert (rule.next_wave(hits, trials) > 0) == (not rule.decide(hits=hits, trials=trials).final)


@given(sprt_rules, st.integers(0, 200))
def test_sprt_never_passes_with_zero_hits(rule, trials):
    """No number of trials without a hit ever passes."""
    assert not rule.decide(hits=0, trials=trials).passed


@given(sprt_rules, counts)
def test_one_more_hit_never_turns_a_pass_into_a_fail(rule, hn):
    """The test is monotone in hits: if h of n passes, h + 1 of n passes too."""
    hits, trials = hn
    if hits < trials and rule.decide(hits=hits, trials=trials).passed:
        assert rule.decide(hits=hits + 1, trials=trials).passed


@given(sprt_rules)
def test_all_hits_pass_by_max_trials(rule):
    """The validator guarantees a run of all hits can pass within the cap."""
    assert rule.decide(hits=rule.max_trials, trials=rule.max_trials).passed


@pytest.mark.parametrize(
    "kwargs",
    [
        {"p0": 0.6, "p1": 0.8},
        {"p0": 0.8, "p1": 0.8},
        {"p0": 1.0, "p1": 0.6},
        {"p0": 0.8, "p1": 0.0},
        {"alpha": 0.5},
        {"beta": 0.0},
        {"max_trials": 0},
        {"max_trials": 10},
        {"wave": 0},
        {"extra": 1},
    ],
)
def test_sprt_refuses_bad_parameters(kwargs):
    """p1 >= p0, rates outside (0, 1), alpha/beta outside (0, 0.5), a cap too small to pass, wave 0, extras: refused."""
    with pytest.raises(ValidationError):
        SprtRule(**{"p0": 0.8, "p1": 0.6, "max_trials": 120, **kwargs})


def test_sprt_refuses_hits_outside_trials():
    """Hits above the trials are a programming error, not a decision."""
    with pytest.raises(ValueError, match="outside"):
        RULE.decide(hits=5, trials=4)


def test_band_rule_union_dispatches_on_rule():
    """BandRule validates by its `rule` tag to FixedRule or SprtRule."""
    adapter = TypeAdapter(BandRule)
    assert adapter.validate_python({"rule": "fixed", "trials": 5, "min_hits": 4}) == FixedRule(trials=5, min_hits=4)
    assert adapter.validate_python(RULE.model_dump()) == RULE
    with pytest.raises(ValidationError):
        adapter.validate_python({"rule": "bayes"})


def test_fixed_rule_speaks_the_same_interface():
    """FixedRule dispatches what remains of its plan and is final only once every trial is in."""
    rule = FixedRule()
    assert (rule.next_wave(0, 0), rule.next_wave(3, 4), rule.next_wave(8, 10)) == (10, 6, 0)
    assert not rule.decide(hits=3, trials=4).final
    assert rule.decide(hits=8, trials=10).final


def _outcomes(hits: int, trials: int) -> list[Outcome]:
    return [Outcome(trial_index=i, kind=OutcomeKind.HIT if i < hits else OutcomeKind.MISS) for i in range(trials)]


@pytest.mark.parametrize(
    ("hits", "trials", "kind", "needle"),
    [(20, 20, Kind.PASS, "accepts"), (2, 10, Kind.INCONCLUSIVE_SAMPLE, "rate <= 0.6")],
)
def test_fold_uses_the_sprt_decision(hits, trials, kind, needle):
    """gate.verdict.fold turns an SPRT pass into pass and below-band into inconclusive_sample."""
    v = fold(property_id="r", band=Band.STATISTICAL, fixture_digest="d", outcomes=_outcomes(hits, trials), rule=RULE)
    assert v.kind is kind
    assert needle in v.detail
    assert (v.hits, v.trials) == (hits, trials)


def test_fold_of_an_undecided_sprt_is_inconclusive_sample():
    """Undecided at max_trials folds to inconclusive_sample naming the cap."""
    rule = SprtRule(p0=0.8, p1=0.6, max_trials=20)
    v = fold(property_id="r", band=Band.STATISTICAL, fixture_digest="d", outcomes=_outcomes(14, 20), rule=rule)
    assert v.kind is Kind.INCONCLUSIVE_SAMPLE
    assert "undecided at max_trials" in v.detail
