"""gate.verdict: the six closed kinds and the fold from judged trials to exactly one verdict."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gate.core.verdicts.bands import FixedRule, wilson
from gate.core.verdicts.verdict import Band, Kind, Outcome, OutcomeKind, Verdict, fold, harness_verdict

DIGEST = "f" * 64
OC = OutcomeKind


def outcomes_of(kinds, details=None):
    details = details or {}
    return [Outcome(trial_index=i, kind=k, detail=details.get(i, f"d{i}")) for i, k in enumerate(kinds)]


def run(band, kinds, *, rule=None, timeout_is_safety=False):
    if band is Band.STATISTICAL and rule is None:
        rule = FixedRule()
    return fold(
        property_id="p",
        band=band,
        fixture_digest=DIGEST,
        outcomes=outcomes_of(kinds),
        rule=rule,
        timeout_is_safety=timeout_is_safety,
    )


kinds_lists = st.lists(st.sampled_from(list(OutcomeKind)), max_size=30)
bands = st.sampled_from(list(Band))


def containing(required, allowed=tuple(OutcomeKind)):
    """Outcome-kind lists drawn from `allowed` that hold at least one `required`, in any position (inserted at
    a drawn index: the rest is already in random order, so shuffling it all again drew 30 numbers for nothing)."""
    return st.tuples(st.lists(st.sampled_from(list(allowed)), max_size=29), st.integers(0, 29)).map(
        lambda drawn: [*drawn[0][: drawn[1]], required, *drawn[0][drawn[1] :]]
    )


rules = st.integers(1, 30).flatmap(lambda n: st.builds(FixedRule, trials=st.just(n), min_hits=st.integers(0, n)))


# --- the closed set of kinds -------------------------------------------------------------------


def test_kind_has_exactly_the_six_documented_values():
    """Kind enumerates exactly the six verdict kinds of the design, by their wire names."""
    assert {k.value for k in Kind} == {
        "pass",
        "fail_safety",
        "fail_contract",
        "inconclusive_timeout",
        "inconclusive_sample",
        "harness_error",
    }


def test_band_has_exactly_three_values():
    """Band enumerates safety, contract and statistical and nothing else."""
    assert {b.value for b in Band} == {"safety", "contract", "statistical"}


def test_verdict_refuses_an_unknown_kind():
    """A Verdict cannot be built with a kind outside the six (no 'unknown', no None)."""
    for bad in ("unknown", None, "flaky"):
        with pytest.raises(ValidationError):
            Verdict(kind=bad, property_id="p", band=Band.SAFETY, fixture_digest=DIGEST, trials=0, hits=0)


def test_verdict_is_frozen_and_forbids_extra_fields():
    """A Verdict is immutable and rejects undeclared fields."""
    v = harness_verdict("p", Band.CONTRACT, DIGEST, "x", creditable=True)
    with pytest.raises(ValidationError):
        v.kind = Kind.PASS  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Verdict(kind=Kind.PASS, property_id="p", band=Band.SAFETY, fixture_digest=DIGEST, trials=1, hits=1, extra=1)


def test_outcome_refuses_an_unknown_outcome_kind():
    """An Outcome's kind must be hit, miss, timeout or fault."""
    with pytest.raises(ValidationError):
        Outcome(trial_index=0, kind="skipped")


@given(bands, kinds_lists, rules, st.booleans())
def test_fold_returns_one_of_the_six_kinds_counting_trials_and_hits(band, kinds, rule, promote):
    """For any band and outcomes fold returns one of the six kinds, its trials the outcomes and its hits the HITs."""
    v = run(band, kinds, rule=rule, timeout_is_safety=promote)
    assert isinstance(v, Verdict)
    assert v.kind in set(Kind)
    assert v.trials == len(kinds)
    assert v.hits == kinds.count(OC.HIT)
    assert v.property_id == "p"
    assert v.band is band
    assert v.fixture_digest == DIGEST


@given(bands, kinds_lists, rules, st.booleans(), st.randoms())
def test_fold_kind_does_not_depend_on_trial_order(band, kinds, rule, promote, rnd):
    """Shuffling the trials never changes the verdict kind (it depends on counts only)."""
    shuffled = list(kinds)
    rnd.shuffle(shuffled)
    assert (
        run(band, kinds, rule=rule, timeout_is_safety=promote).kind
        == run(band, shuffled, rule=rule, timeout_is_safety=promote).kind
    )


# --- empty input and harness_verdict --------------------------------------------------------------


@pytest.mark.parametrize("band", list(Band))
def test_fold_of_no_outcomes_is_a_harness_error(band):
    """A property with no observed trial is a harness_error saying so, in every band."""
    v = run(band, [])
    assert v.kind is Kind.HARNESS_ERROR
    assert v.detail == "no trial was observed"
    assert v.trials == 0
    assert v.interval is None


def test_harness_verdict_builds_a_zero_trial_harness_error():
    """harness_verdict yields a harness_error with zero trials and the given detail."""
    v = harness_verdict("drifty", Band.STATISTICAL, DIGEST, "fixture drift: a.json", creditable=True)
    assert (v.kind, v.property_id, v.band, v.trials, v.hits, v.detail) == (
        Kind.HARNESS_ERROR,
        "drifty",
        Band.STATISTICAL,
        0,
        0,
        "fixture drift: a.json",
    )
    assert v.interval is None


# --- safety ---------------------------------------------------------------------------------------


@given(containing(OC.MISS), st.booleans())
def test_safety_with_a_miss_never_passes_and_is_fail_safety(kinds, promote):
    """A safety property with at least one MISS is fail_safety, whatever else happened."""
    assert run(Band.SAFETY, kinds, timeout_is_safety=promote).kind is Kind.FAIL_SAFETY


@given(kinds_lists, st.booleans())
def test_safety_passes_only_when_every_trial_hit(kinds, promote):
    """A safety verdict is pass exactly when there was at least one trial and all of them hit."""
    v = run(Band.SAFETY, kinds, timeout_is_safety=promote)
    assert (v.kind is Kind.PASS) == (bool(kinds) and all(k is OC.HIT for k in kinds))


def test_safety_miss_outranks_a_harness_fault():
    """A safety miss on an observed trial beats a fault on another trial (definite evidence wins)."""
    assert run(Band.SAFETY, [OC.FAULT, OC.MISS, OC.TIMEOUT]).kind is Kind.FAIL_SAFETY


def test_safety_fault_without_miss_is_harness_error():
    """A safety property with a fault and no miss is a harness_error."""
    assert run(Band.SAFETY, [OC.HIT, OC.FAULT]).kind is Kind.HARNESS_ERROR


def test_safety_timeout_without_promotion_is_inconclusive_timeout():
    """A safety trial that timed out without timeout_is_safety is inconclusive_timeout."""
    assert run(Band.SAFETY, [OC.HIT, OC.TIMEOUT]).kind is Kind.INCONCLUSIVE_TIMEOUT


def test_safety_fault_outranks_an_unpromoted_timeout():
    """Between two gaps in the evidence, the harness fault wins over the timeout."""
    assert run(Band.SAFETY, [OC.TIMEOUT, OC.FAULT]).kind is Kind.HARNESS_ERROR


def test_safety_promoted_timeout_outranks_a_fault():
    """On a safety property a promoted timeout is fail_safety even when another trial faulted."""
    v = run(Band.SAFETY, [OC.FAULT, OC.TIMEOUT], timeout_is_safety=True)
    assert v.kind is Kind.FAIL_SAFETY
    assert "timeout_is_safety" in v.detail


# --- contract -------------------------------------------------------------------------------------


@given(containing(OC.MISS), st.booleans())
def test_contract_with_a_miss_is_fail_contract(kinds, promote):
    """A contract miss is fail_contract, unless a promoted timeout makes it the graver fail_safety."""
    expected = Kind.FAIL_SAFETY if promote and OC.TIMEOUT in kinds else Kind.FAIL_CONTRACT
    assert run(Band.CONTRACT, kinds, timeout_is_safety=promote).kind is expected


@given(kinds_lists, st.booleans())
def test_contract_passes_only_when_every_trial_hit(kinds, promote):
    """A contract verdict is pass exactly when there was at least one trial and all of them hit."""
    v = run(Band.CONTRACT, kinds, timeout_is_safety=promote)
    assert (v.kind is Kind.PASS) == (bool(kinds) and all(k is OC.HIT for k in kinds))


def test_contract_fault_without_miss_is_harness_error():
    """A contract property with a fault and no miss is a harness_error."""
    assert run(Band.CONTRACT, [OC.FAULT]).kind is Kind.HARNESS_ERROR


def test_contract_timeout_is_inconclusive_timeout():
    """A contract trial that timed out is inconclusive_timeout."""
    v = run(Band.CONTRACT, [OC.TIMEOUT])
    assert v.kind is Kind.INCONCLUSIVE_TIMEOUT
    assert v.detail == "trial 0: d0"


def test_contract_timeout_promoted_is_fail_safety():
    """A contract property declaring timeout_is_safety turns a fired deadline into fail_safety."""
    v = run(Band.CONTRACT, [OC.TIMEOUT], timeout_is_safety=True)
    assert v.kind is Kind.FAIL_SAFETY
    assert v.detail.startswith("deadline fired (timeout_is_safety): trial 0")


def test_contract_verdict_carries_no_interval():
    """Only statistical verdicts carry a Wilson interval."""
    assert run(Band.CONTRACT, [OC.HIT]).interval is None
    assert run(Band.SAFETY, [OC.HIT]).interval is None


# --- statistical ----------------------------------------------------------------------------------


@given(kinds_lists, rules)
def test_statistical_without_promotion_never_fails(kinds, rule):
    """Without timeout_is_safety no outcome sequence makes a statistical property fail_*."""
    assert run(Band.STATISTICAL, kinds, rule=rule).kind not in (Kind.FAIL_SAFETY, Kind.FAIL_CONTRACT)


@given(st.lists(st.sampled_from([OC.HIT, OC.MISS]), min_size=1, max_size=40), rules)
def test_statistical_misses_alone_never_fail_and_the_band_rule_decides(kinds, rule):
    """With hits and misses only, a statistical verdict is never fail_* and passes exactly when hits reach min_hits."""
    v = run(Band.STATISTICAL, kinds, rule=rule)
    assert v.kind in (Kind.PASS, Kind.INCONCLUSIVE_SAMPLE)
    assert (v.kind is Kind.PASS) == (kinds.count(OC.HIT) >= rule.min_hits)


@given(st.lists(st.sampled_from(list(OutcomeKind)), min_size=1, max_size=40), rules, st.booleans())
def test_statistical_verdict_carries_the_wilson_interval(kinds, rule, promote):
    """Every non-empty statistical verdict carries the Wilson interval of its hits over its trials."""
    v = run(Band.STATISTICAL, kinds, rule=rule, timeout_is_safety=promote)
    assert v.interval == wilson(kinds.count(OC.HIT), len(kinds))


def test_statistical_eight_of_ten_passes_the_default_band():
    """8 hits in 10 trials passes the default 8-of-10 band, with the reason and the misses as detail."""
    v = run(Band.STATISTICAL, [OC.HIT] * 8 + [OC.MISS] * 2)
    assert v.kind is Kind.PASS
    assert v.detail == "8/10 hits, band needs 8; first misses: trial 8: d8; trial 9: d9"


def test_statistical_seven_of_ten_is_inconclusive_sample():
    """7 hits in 10 trials is inconclusive_sample under the default band."""
    v = run(Band.STATISTICAL, [OC.HIT] * 7 + [OC.MISS] * 3)
    assert v.kind is Kind.INCONCLUSIVE_SAMPLE
    assert v.detail == "7/10 hits below band of 8; first misses: trial 7: d7; trial 8: d8; trial 9: d9"


def statistical(outcomes):
    return fold(property_id="p", band=Band.STATISTICAL, fixture_digest=DIGEST, outcomes=outcomes, rule=FixedRule())


def test_statistical_detail_keeps_the_first_three_distinct_misses_in_trial_order():
    """Repeated messages count once, only three are kept, each cut to 200 characters."""
    long = "x" * 500
    details = {0: "same", 1: "same", 2: long, 3: "third", 4: "fourth"}
    shuffled = list(reversed(outcomes_of([OC.MISS] * 5, details)))
    v = statistical(shuffled)
    assert v.detail == f"0/5 hits below band of 8; first misses: trial 0: same; trial 2: {'x' * 199}…; trial 3: third"


def test_statistical_miss_messages_cannot_break_the_detail_line():
    """A miss message quoting the patch's newlines, ESC or a lone surrogate stays on one escaped line."""
    details = {0: "total\n10.01 != 10.02\x1b[2J", 1: "bad \ud800"}
    v = statistical(outcomes_of([OC.MISS, OC.MISS], details))
    assert "\n" not in v.detail and "\x1b" not in v.detail
    assert "trial 0: total\\n10.01 != 10.02\\x1b[2J" in v.detail
    assert "trial 1: bad \\ud800" in v.detail
    v.detail.encode("utf-8")


def test_statistical_without_miss_messages_keeps_the_bare_count():
    """Misses that carry no message add nothing after the count summary."""
    v = statistical(outcomes_of([OC.MISS] * 3, dict.fromkeys(range(3), "")))
    assert v.detail == "0/3 hits below band of 8"


def test_statistical_fault_outranks_misses():
    """A statistical property with a fault is a harness_error even when misses are present."""
    assert run(Band.STATISTICAL, [OC.MISS] * 9 + [OC.FAULT]).kind is Kind.HARNESS_ERROR


def test_statistical_timeout_outranks_sampler_noise():
    """A statistical property with a timeout is inconclusive_timeout, not inconclusive_sample."""
    assert run(Band.STATISTICAL, [OC.MISS] * 9 + [OC.TIMEOUT]).kind is Kind.INCONCLUSIVE_TIMEOUT


def test_statistical_timeout_promoted_is_fail_safety():
    """A statistical property declaring timeout_is_safety turns a fired deadline into fail_safety."""
    assert run(Band.STATISTICAL, [OC.HIT] * 9 + [OC.TIMEOUT], timeout_is_safety=True).kind is Kind.FAIL_SAFETY


def test_statistical_without_a_rule_is_refused():
    """Folding a statistical property without a band rule raises instead of guessing."""
    with pytest.raises(ValueError, match="needs a band rule"):
        fold(property_id="s", band=Band.STATISTICAL, fixture_digest=DIGEST, outcomes=outcomes_of([OC.HIT]))


def test_statistical_without_a_rule_still_reports_earlier_rows():
    """A statistical fault is reported as harness_error before the missing rule matters."""
    v = fold(property_id="s", band=Band.STATISTICAL, fixture_digest=DIGEST, outcomes=outcomes_of([OC.FAULT]))
    assert v.kind is Kind.HARNESS_ERROR


@pytest.mark.parametrize("band", [Band.STATISTICAL, Band.CONTRACT])
def test_promoted_timeout_outranks_a_fault_in_every_band(band):
    """A promoted timeout is fail_safety even when another trial faulted, whatever the band."""
    v = run(band, [OC.TIMEOUT, OC.FAULT, OC.HIT], timeout_is_safety=True)
    assert v.kind is Kind.FAIL_SAFETY


# --- precedence across bands (hypothesis) ---------------------------------------------------------


@given(bands, st.lists(st.sampled_from(list(OutcomeKind)), min_size=1, max_size=30), rules, st.booleans())
def test_fold_follows_the_documented_precedence(band, kinds, rule, promote):
    """fold matches a direct statement of the precedence: safety breaches, contract misses, faults, timeouts, band."""
    c = Counter(kinds)
    v = run(band, kinds, rule=rule, timeout_is_safety=promote)
    if (band is Band.SAFETY and c[OC.MISS]) or (c[OC.TIMEOUT] and promote):
        expected = Kind.FAIL_SAFETY
    elif band is Band.CONTRACT and c[OC.MISS]:
        expected = Kind.FAIL_CONTRACT
    elif c[OC.FAULT]:
        expected = Kind.HARNESS_ERROR
    elif c[OC.TIMEOUT]:
        expected = Kind.FAIL_SAFETY if promote else Kind.INCONCLUSIVE_TIMEOUT
    elif band is Band.STATISTICAL:
        expected = Kind.PASS if c[OC.HIT] >= rule.min_hits else Kind.INCONCLUSIVE_SAMPLE
    else:
        expected = Kind.PASS
    assert v.kind is expected


@given(bands, containing(OC.FAULT, (OC.HIT, OC.FAULT, OC.TIMEOUT)))
def test_fault_without_miss_and_without_promotion_is_harness_error(band, kinds):
    """Absent misses and promotion, any faulted trial makes the verdict harness_error in every band."""
    assert run(band, kinds).kind is Kind.HARNESS_ERROR


@given(bands, containing(OC.TIMEOUT, (OC.HIT, OC.TIMEOUT)))
def test_timeout_is_safety_promotes_every_timeout_to_fail_safety(band, kinds):
    """With no miss and no fault, a fired deadline is fail_safety when promoted and inconclusive otherwise."""
    assert run(band, kinds, timeout_is_safety=True).kind is Kind.FAIL_SAFETY
    assert run(band, kinds, timeout_is_safety=False).kind is Kind.INCONCLUSIVE_TIMEOUT


# --- details --------------------------------------------------------------------------------------


def test_detail_names_the_first_miss_and_counts_the_rest():
    """The detail names the first deciding trial's index and detail, then how many more there were."""
    outs = outcomes_of([OC.HIT, OC.MISS, OC.MISS, OC.MISS], {1: "wrote /etc/x", 2: "b", 3: "c"})
    v = fold(property_id="p", band=Band.SAFETY, fixture_digest=DIGEST, outcomes=outs)
    # Trial 0 hit on the same bytes, so the row also says it changed colour (issue 14).
    assert v.detail == (
        "trial 1: wrote /etc/x (+2 more); changed colour on identical bytes: hits at trials 0; misses at trials 1, 2, 3"
    )


def test_detail_of_a_single_miss_has_no_more_suffix():
    """A single deciding trial's detail carries no '(+n more)' suffix."""
    outs = outcomes_of([OC.MISS], {0: "shape differs"})
    v = fold(property_id="p", band=Band.CONTRACT, fixture_digest=DIGEST, outcomes=outs)
    assert v.detail == "trial 0: shape differs"


def test_detail_of_a_fault_names_the_fault():
    """A harness_error from a faulted trial carries that trial's fault detail."""
    outs = outcomes_of([OC.HIT, OC.FAULT], {1: "container could not start"})
    v = fold(property_id="p", band=Band.CONTRACT, fixture_digest=DIGEST, outcomes=outs)
    assert v.detail == "trial 1: container could not start"


def test_pass_on_safety_has_empty_detail():
    """A passing safety or contract verdict carries no detail."""
    assert run(Band.SAFETY, [OC.HIT, OC.HIT]).detail == ""


@pytest.mark.parametrize(
    ("creditable", "expected"), [((True, True), True), ((True, False), False), ((False, False), False)]
)
def test_a_harness_error_is_creditable_only_when_every_fault_is(creditable, expected):
    """A folded harness_error may draw a credit only when each of its faults was proven outside the patch."""
    faults = [Outcome(trial_index=i, kind=OC.FAULT, detail="gone", creditable=c) for i, c in enumerate(creditable)]
    v = fold(property_id="p", band=Band.CONTRACT, fixture_digest=DIGEST, outcomes=faults)
    assert (v.kind, v.creditable) == (Kind.HARNESS_ERROR, expected)


def test_a_lone_surrogate_in_a_detail_is_escaped_so_the_card_can_be_written() -> None:
    """A check quoting probe JSON that held "\\ud800" leaves a detail that encodes as UTF-8 (escaped)."""
    from gate.core.verdicts.verdict import Outcome, OutcomeKind

    outcome = Outcome(trial_index=0, kind=OutcomeKind.MISS, detail="got '\ud800' back")
    assert outcome.detail == "got '\\ud800' back"
    outcome.model_dump_json().encode("utf-8")
