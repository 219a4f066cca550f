"""gate.bands: the Wilson interval, the fixed N-of-M band rule and the sampler window budget."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gate.core.verdicts.bands import FixedRule, Interval, SamplerWindow, wilson

counts = st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


# --- wilson ---------------------------------------------------------------------------------------


def test_wilson_eight_of_ten_is_about_049_to_094():
    """The 95% Wilson interval of 8 hits in 10 is about [0.49, 0.94], as the module says."""
    iv = wilson(8, 10)
    assert iv.low == pytest.approx(0.4902, abs=5e-4)
    assert iv.high == pytest.approx(0.9433, abs=5e-4)
    assert (iv.level, iv.method) == (0.95, "wilson")


def test_wilson_five_of_ten_is_symmetric_about_one_half():
    """5 of 10 gives the textbook interval [0.2366, 0.7634], symmetric about 0.5."""
    iv = wilson(5, 10)
    assert iv.low == pytest.approx(0.2366, abs=5e-4)
    assert iv.high == pytest.approx(0.7634, abs=5e-4)
    assert iv.low + iv.high == pytest.approx(1.0)


def test_wilson_zero_of_ten_upper_bound():
    """0 of 10 has an upper bound near 0.278 (the rule-of-three neighbourhood), not 0."""
    assert wilson(0, 10).high == pytest.approx(0.2775, abs=5e-4)


@given(counts)
def test_wilson_lies_in_the_unit_interval(hn):
    """The Wilson interval is ordered and inside [0, 1] for every hits/trials."""
    iv = wilson(*hn)
    assert 0.0 <= iv.low <= iv.high <= 1.0


@given(st.integers(2, 5000).flatmap(lambda n: st.tuples(st.integers(1, n - 1), st.just(n))))
def test_wilson_contains_the_observed_rate_strictly_inside(hn):
    """For 0 < hits < trials the interval contains hits/trials strictly inside."""
    hits, trials = hn
    iv = wilson(hits, trials)
    assert iv.low < hits / trials < iv.high


@given(counts)
def test_wilson_contains_the_observed_rate_within_rounding(hn):
    """hits/trials lies within the interval, allowing one ulp-scale rounding error at the ends."""
    hits, trials = hn
    iv = wilson(hits, trials)
    assert iv.low - 1e-12 <= hits / trials <= iv.high + 1e-12


def test_wilson_contains_the_observed_rate_at_the_ends():
    """At 0 hits the low bound is exactly 0 and at all hits the high bound is exactly 1."""
    bad = [(h, n) for n in range(1, 201) for h in (0, n) if not wilson(h, n).low <= h / n <= wilson(h, n).high]
    assert bad == []


@given(st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n - 1), st.just(n))))
def test_wilson_is_monotone_in_hits(hn):
    """One more hit in the same number of trials never lowers either bound."""
    hits, trials = hn
    a, b = wilson(hits, trials), wilson(hits + 1, trials)
    assert b.low >= a.low
    assert b.high >= a.high


def test_wilson_narrows_with_more_trials():
    """The same rate over ten times the trials gives a strictly narrower interval."""
    small, large = wilson(8, 10), wilson(80, 100)
    assert large.high - large.low < small.high - small.low


@pytest.mark.parametrize("trials", [0, -1])
def test_wilson_with_no_trials_is_the_whole_unit_interval(trials):
    """With no trials nothing is known: the interval is [0, 1]."""
    assert wilson(0, trials) == Interval(low=0.0, high=1.0)


@pytest.mark.parametrize(("hits", "trials"), [(-1, 10), (11, 10)])
def test_wilson_refuses_hits_outside_the_trials(hits, trials):
    """Hits below 0 or above the trials raise ValueError."""
    with pytest.raises(ValueError, match="outside"):
        wilson(hits, trials)


def test_wilson_wider_z_gives_wider_interval():
    """A larger z widens the interval around the same rate."""
    narrow, wide = wilson(8, 10, z=1.0), wilson(8, 10, z=3.0)
    assert wide.low < narrow.low
    assert wide.high > narrow.high


def test_interval_is_frozen():
    """An Interval cannot be mutated after construction."""
    iv = wilson(1, 2)
    with pytest.raises(ValidationError):
        iv.low = 0.0  # type: ignore[misc]


# --- FixedRule ------------------------------------------------------------------------------------


def test_fixed_rule_defaults_to_eight_of_ten():
    """The default rule is the notes' 8 of 10."""
    rule = FixedRule()
    assert (rule.rule, rule.trials, rule.min_hits, rule.planned_trials()) == ("fixed", 10, 8, 10)


@given(st.integers(1, 1000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_fixed_rule_passes_exactly_at_min_hits(mn):
    """Exactly min_hits passes and min_hits - 1 does not."""
    min_hits, trials = mn
    rule = FixedRule(trials=trials, min_hits=min_hits)
    assert rule.decide(hits=min_hits, trials=trials).passed
    if min_hits > 0:
        assert not rule.decide(hits=min_hits - 1, trials=trials).passed


def test_fixed_rule_reasons_name_hits_and_band():
    """The decision's reason names the hits, the trials and the band."""
    rule = FixedRule()
    assert rule.decide(hits=9, trials=10).reason == "9/10 hits, band needs 8"
    assert rule.decide(hits=7, trials=10).reason == "7/10 hits below band of 8"


def test_fixed_rule_with_zero_min_hits_always_passes():
    """A band of 0 hits passes even with no hits at all."""
    assert FixedRule(trials=3, min_hits=0).decide(hits=0, trials=3).passed


def test_fixed_rule_refuses_min_hits_above_trials():
    """min_hits greater than trials is refused at construction."""
    with pytest.raises(ValidationError, match="min_hits 11 exceeds trials 10"):
        FixedRule(trials=10, min_hits=11)


def test_fixed_rule_accepts_min_hits_equal_to_trials():
    """min_hits equal to trials is a valid (all-must-hit) band."""
    assert FixedRule(trials=5, min_hits=5).decide(hits=5, trials=5).passed


@pytest.mark.parametrize(
    "kwargs", [{"trials": 0}, {"trials": 100_001}, {"min_hits": -1}, {"rule": "sprt"}, {"extra": 1}]
)
def test_fixed_rule_refuses_out_of_range_fields(kwargs):
    """Trials outside 1..100000, negative min_hits, another rule name or an extra key are refused."""
    with pytest.raises(ValidationError):
        FixedRule(**kwargs)


# --- SamplerWindow --------------------------------------------------------------------------------


def test_sampler_window_defaults_to_four_in_twenty():
    """The default window holds 20 verdicts and tolerates 4 inconclusive ones."""
    w = SamplerWindow()
    assert (w.size, w.max_inconclusive, w.recent, w.tripped) == (20, 4, (), False)


def test_four_inconclusive_in_twenty_does_not_trip():
    """Exactly the budget (4 in 20) does not trip the window."""
    w = SamplerWindow().push([True] * 4 + [False] * 16)
    assert w.inconclusive == 4
    assert not w.tripped


def test_five_inconclusive_in_twenty_trips():
    """One over the budget (5 in 20) trips the window."""
    w = SamplerWindow().push([True] * 5 + [False] * 15)
    assert w.inconclusive == 5
    assert w.tripped


def test_old_inconclusive_samples_age_out_of_the_window():
    """Inconclusive samples pushed out by newer passes stop counting, and the trip clears."""
    w = SamplerWindow().push([True] * 5)
    assert w.tripped
    w = w.push([False] * 16)
    assert w.inconclusive == 4
    assert not w.tripped


def test_push_does_not_mutate_the_original_window():
    """push returns a new window and leaves the old one as it was."""
    w = SamplerWindow()
    w2 = w.push([True])
    assert w.recent == ()
    assert w2.recent == (True,)


@given(st.integers(1, 30), st.lists(st.lists(st.booleans(), max_size=15), max_size=10))
def test_window_keeps_the_newest_size_verdicts_however_they_are_batched(size, batches):
    """After any sequence of pushes the window holds exactly the newest `size` verdicts, oldest first, the same
    window as pushing them all in one batch."""
    w = SamplerWindow(size=size)
    for batch in batches:
        w = w.push(batch)
        assert len(w.recent) <= size
    flat = [x for b in batches for x in b]
    assert w.recent == tuple(flat[-size:])
    assert w == SamplerWindow(size=size).push(flat)


@given(st.integers(1, 30), st.integers(0, 30), st.lists(st.booleans(), max_size=60))
def test_window_trips_exactly_when_count_exceeds_max(size, max_inc, verdicts):
    """The window trips exactly when its inconclusive count is strictly greater than the budget."""
    w = SamplerWindow(size=size, max_inconclusive=max_inc).push(verdicts)
    assert w.inconclusive == sum(verdicts[-size:])
    assert w.tripped == (w.inconclusive > max_inc)


@pytest.mark.parametrize("kwargs", [{"size": 0}, {"max_inconclusive": -1}])
def test_sampler_window_refuses_bad_sizes(kwargs):
    """A window of size 0 or a negative budget is refused."""
    with pytest.raises(ValidationError):
        SamplerWindow(**kwargs)
