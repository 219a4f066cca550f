"""gate.core.verdicts.pairfold and the paired tally: outcomes into pairs, pairs into one verdict, and
how many pairs the coordinator asks for next."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.suite.fold import Tally, fold_tallies
from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import Observation, Side
from gate.core.verdicts.paired import PairCounts, PairedRule, PairedState
from gate.core.verdicts.pairfold import fold_paired, pair_up, paired_kind, pairs_disagree
from gate.core.verdicts.verdict import Kind, Outcome, OutcomeCounts, OutcomeKind, PairedEvidence

RULE = PairedRule(margin=0.05, max_pairs=400, wave=10)
HIT, MISS, TIMEOUT, FAULT = OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.TIMEOUT, OutcomeKind.FAULT


def outcomes(kinds: list[OutcomeKind], start: int = 0, **extra) -> list[Outcome]:
    return [Outcome(trial_index=start + i, kind=k, detail=f"{k} {start + i}", **extra) for i, k in enumerate(kinds)]


def sides(both_pass: int, base_only: int, patch_only: int, both_fail: int) -> tuple[list[Outcome], list[Outcome]]:
    """(base, patch) outcomes of trial indices 0.. making exactly these pair counts."""
    base = [HIT] * both_pass + [HIT] * base_only + [MISS] * patch_only + [MISS] * both_fail
    patch = [HIT] * both_pass + [MISS] * base_only + [HIT] * patch_only + [MISS] * both_fail
    return outcomes(base), outcomes(patch)


def verdict(base: list[Outcome], patch: list[Outcome], **kwargs):
    return fold_paired(property_id="p", fixture_digest="d", patch=patch, base=base, rule=RULE, **kwargs)


def test_pairs_match_by_trial_index_not_by_arrival():
    """Pairs join the two sides' trials of the same index, whatever order they arrived in."""
    base = outcomes([HIT, MISS, HIT])
    patch = list(reversed(outcomes([HIT, HIT, MISS])))
    assert pair_up(base, patch) == PairCounts(both_pass=1, patch_only=1, base_only=1)


def test_an_index_judged_on_one_side_only_makes_no_pair():
    """A timeout, a fault or a missing trial on either side leaves its index out of the pairs."""
    base = outcomes([HIT, TIMEOUT, HIT])
    patch = outcomes([HIT, HIT, FAULT, HIT])
    assert pair_up(base, patch) == PairCounts(both_pass=1)


def test_equal_sides_pass_after_enough_agreeing_pairs():
    """60 agreeing pairs pass: kind pass, the paired evidence on the verdict, a reason naming the pairs."""
    base, patch = sides(55, 0, 0, 5)
    v = verdict(base, patch)
    assert v.kind is Kind.PASS
    assert v.paired == PairedEvidence(
        base=OutcomeCounts(hit=55, miss=5), pairs=PairCounts(both_pass=55, both_fail=5), state=PairedState.PASS
    )
    assert (v.trials, v.hits, v.counts) == (60, 55, OutcomeCounts(hit=55, miss=5))
    assert "no worse than the base by 0.05" in v.detail


def test_a_worse_patch_is_inconclusive_sample_naming_worse():
    """Ten base-only pairs in a hundred: inconclusive_sample, the reason says worse, first misses quoted."""
    base, patch = sides(85, 10, 0, 5)
    v = verdict(base, patch)
    assert v.kind is Kind.INCONCLUSIVE_SAMPLE
    assert v.paired is not None and v.paired.state is PairedState.WORSE
    assert "worse than the base by 0.05" in v.detail and "first misses: trial 85" in v.detail


def test_undecided_at_the_cap_is_inconclusive_sample_naming_undecided():
    """Between the bounds at max_pairs: inconclusive_sample whose reason says undecided, not worse."""
    rule = PairedRule(margin=0.05, max_pairs=100)
    base, patch = sides(80, 10, 8, 2)
    v = fold_paired(property_id="p", fixture_digest="d", patch=patch, base=base, rule=rule)
    assert v.kind is Kind.INCONCLUSIVE_SAMPLE
    assert "undecided at max_pairs 100" in v.detail


@pytest.mark.parametrize(
    ("base_kinds", "patch_kinds", "kind", "needle"),
    [
        ([HIT, HIT], [HIT, TIMEOUT], Kind.INCONCLUSIVE_TIMEOUT, "timeout 1"),
        ([HIT, TIMEOUT], [HIT, HIT], Kind.INCONCLUSIVE_TIMEOUT, "on the base: trial 1"),
        ([HIT, FAULT], [HIT, HIT], Kind.HARNESS_ERROR, "on the base: trial 1"),
        ([HIT, HIT], [FAULT, MISS], Kind.HARNESS_ERROR, "fault 0"),
    ],
)
def test_a_gap_on_either_side_is_never_a_pass(base_kinds, patch_kinds, kind, needle):
    """A timeout or fault on the patch's side or the base's keeps the pairs from deciding, naming the side."""
    v = verdict(outcomes(base_kinds), outcomes(patch_kinds))
    assert v.kind is kind
    assert needle in v.detail


def test_a_promoted_patch_timeout_is_a_safety_failure_but_a_base_timeout_is_not():
    """timeout_is_safety promotes the patch's own timeout only."""
    assert verdict(outcomes([HIT]), outcomes([TIMEOUT]), timeout_is_safety=True).kind is Kind.FAIL_SAFETY
    assert verdict(outcomes([TIMEOUT]), outcomes([HIT]), timeout_is_safety=True).kind is Kind.INCONCLUSIVE_TIMEOUT


def test_a_harness_error_is_creditable_only_when_every_fault_on_both_sides_was_the_harness():
    """Faults proven outside the patch on both sides may draw a credit; one unproven fault may not."""
    proven = outcomes([FAULT], creditable=True)
    assert verdict(proven, outcomes([FAULT], creditable=True)).creditable
    assert not verdict(outcomes([FAULT]), outcomes([FAULT], creditable=True)).creditable


@given(st.integers(0, 80), st.integers(0, 20), st.integers(0, 20), st.integers(0, 20))
def test_the_fold_and_the_count_only_decision_agree(both_pass, base_only, patch_only, both_fail):
    """`paired_kind` on the verdict's counts gives the verdict's kind: accept recomputes what the run found."""
    base, patch = sides(both_pass, base_only, patch_only, both_fail)
    v = verdict(base, patch)
    assert v.paired is not None
    assert pairs_disagree(v.counts, v.paired) is None
    assert paired_kind(v.counts, v.paired, RULE) is v.kind


def test_pair_counts_that_do_not_add_up_are_refused():
    """Pairs that cannot come from the two sides' counts raise rather than decide."""
    evidence = PairedEvidence(base=OutcomeCounts(hit=60), pairs=PairCounts(both_pass=60), state=PairedState.PASS)
    with pytest.raises(ValueError, match="patch hits 50 but the pairs give 60"):
        paired_kind(OutcomeCounts(hit=50, miss=10), evidence, RULE)


# --- the tally the wave loop feeds --------------------------------------------------------------------

PROP = PropertySpec.model_validate(
    {"id": "p", "band": "statistical", "fixture": "f.json", "check": "checks:c", "rule": "paired", "margin": 0.05,
     "max_pairs": 100, "wave": 10}
)  # fmt: skip


def obs(index: int, side: Side = Side.PATCH) -> Observation:
    return Observation(run_id="r", property_id="p", trial_index=index, side=side)


def feed(tally: Tally, base: list[Outcome], patch: list[Outcome]) -> None:
    for outcome in patch:
        tally.add(obs(outcome.trial_index), outcome)
    for outcome in base:
        tally.add_base(obs(outcome.trial_index, Side.BASE), outcome)


def test_the_tally_asks_for_one_wave_of_pairs_then_waits_for_both_sides():
    """A paired tally asks for a wave of pairs, then nothing until the base's trials of those indices are in."""
    tally = Tally(PROP)
    assert tally.paired and tally.more() == 10
    tally.dispatched = 10
    base, patch = sides(10, 0, 0, 0)
    feed(tally, [], patch)
    assert tally.more() == 0
    feed(tally, base, [])
    assert tally.more() == 10


def test_the_tally_stops_once_the_pairs_decide_and_at_a_broken_base():
    """No more pairs once the test has decided, nor after a base timeout."""
    decided = Tally(PROP, dispatched=60)
    feed(decided, *sides(60, 0, 0, 0))
    assert decided.more() == 0
    broken = Tally(PROP, dispatched=10)
    base, patch = sides(10, 0, 0, 0)
    feed(broken, [*base[:9], Outcome(trial_index=9, kind=TIMEOUT)], patch)
    assert broken.more() == 0


def test_fold_tallies_folds_pairs_and_calls_missing_base_trials_a_harness_error():
    """A complete paired tally folds by its pairs; one whose base side never ran is a non-creditable harness_error."""
    done = Tally(PROP, dispatched=60)
    feed(done, *sides(60, 0, 0, 0))
    unpaired = Tally(PROP, dispatched=10)
    feed(unpaired, [], sides(10, 0, 0, 0)[1])
    folded = fold_tallies([done, unpaired], {"f.json": "digest"}, calibrated=frozenset())
    first, second = folded.verdicts
    assert first.kind is Kind.PASS and first.paired is not None
    assert second.kind is Kind.HARNESS_ERROR and not second.creditable
    assert "10 base trial(s) never reported" in second.detail


def test_a_run_without_a_base_refuses_a_paired_property_before_any_trial(tmp_path):
    """No --base: a paired property is refused in one line (exit 64), before any trial or card."""
    import pytest
    from support.mini_suite import GATE_TOML, build_suite, good, run

    from gate.core.errors import RET_USAGE, UsageError

    suite = build_suite(tmp_path)
    paired = 'check = "checks:tool_choice"\nrule = "paired"\nmargin = 0.05\nmax_pairs = 100\n'
    suite.request.suite.write_text(GATE_TOML.replace('check = "checks:tool_choice"\n', paired))
    asked: list[int] = []

    def counted(spec, fixture):
        asked.append(spec.trial_index)
        return good(spec, fixture)

    with pytest.raises(UsageError, match='tool_choice_rate uses rule = "paired"') as refused:
        run(suite, counted)
    assert refused.value.exit_code == RET_USAGE and "\n" not in str(refused.value)
    assert asked == [] and not suite.card.exists()
