"""gate.policy.decide: the decision table, its precedence, freezes, credits and the sampler window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.errors import RET_BLOCKED, RET_HARNESS, RET_OK, RET_SAMPLER
from gate.core.policy.ledger import Ledger, LedgerAction
from gate.core.policy.policy import JobStatus, decide
from gate.core.testing import make_verdict
from gate.core.verdicts.bands import SamplerWindow
from gate.core.verdicts.verdict import Band, Kind

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
S = JobStatus


def v(pid, band, kind, detail="", creditable=True):
    return make_verdict(pid, band, kind, detail, creditable=creditable)


def run(verdicts, *, frozen=None, ledger=None, window=None):
    return decide(
        verdicts,
        frozen=frozen or {},
        ledger=ledger if ledger is not None else Ledger(),
        window=window if window is not None else SamplerWindow(),
        now=NOW,
    )


def noisy_window(inconclusive=4, size=20):
    """A window already holding `inconclusive` inconclusive samples among `size` entries."""
    return SamplerWindow().push([True] * inconclusive + [False] * (size - inconclusive))


PASS_SAFE = v("safe", Band.SAFETY, Kind.PASS)
PASS_SHAPE = v("shape", Band.CONTRACT, Kind.PASS)
PASS_RATE = v("rate", Band.STATISTICAL, Kind.PASS)


# --- one row at a time ----------------------------------------------------------------------------


def test_all_pass_is_accepted_with_exit_zero():
    """Every voting property passing is ACCEPTED with exit 0 and no reasons."""
    d = run([PASS_SAFE, PASS_SHAPE, PASS_RATE])
    assert (d.status, d.exit_code, d.reasons) == (S.ACCEPTED, RET_OK, ())
    assert all(vote.voting for vote in d.votes)


def test_fail_safety_blocks_with_exit_one():
    """Row 1: an extra write or secret (fail_safety) blocks the job with exit 1 and names the property."""
    d = run([v("safe", Band.SAFETY, Kind.FAIL_SAFETY, "wrote /etc/passwd"), PASS_SHAPE])
    assert (d.status, d.exit_code) == (S.BLOCKED, RET_BLOCKED)
    assert d.reasons == ("safe: fail_safety (wrote /etc/passwd)",)


def test_fail_contract_blocks_with_exit_one_and_draws_no_credit():
    """Row 2: a contract miss blocks with exit 1 and is never covered by a credit."""
    d = run([v("shape", Band.CONTRACT, Kind.FAIL_CONTRACT, "missing total"), PASS_SAFE])
    assert (d.status, d.exit_code) == (S.BLOCKED, RET_BLOCKED)
    assert d.ledger_actions == ()
    assert d.votes[0].voting


def test_inconclusive_sample_under_budget_is_inconclusive_exit_zero():
    """Row 3: hits below the band, with the window under budget, do not block (INCONCLUSIVE, exit 0)."""
    d = run([v("rate", Band.STATISTICAL, Kind.INCONCLUSIVE_SAMPLE), PASS_SAFE])
    assert (d.status, d.exit_code) == (S.INCONCLUSIVE, RET_OK)
    assert d.window.recent == (True,)


def test_inconclusive_sample_that_trips_the_window_exits_three():
    """Row 3/6: the inconclusive sample that makes it 5 in 20 fails the job with exit 3."""
    d = run([v("rate", Band.STATISTICAL, Kind.INCONCLUSIVE_SAMPLE)], window=noisy_window(4, 19))
    assert (d.status, d.exit_code) == (S.SAMPLER_BUDGET_EXCEEDED, RET_SAMPLER)
    assert d.window.inconclusive == 5
    assert any(r.startswith("sampler_budget_exceeded: 5 inconclusive_sample in the last 20") for r in d.reasons)


def test_four_in_twenty_does_not_trip():
    """Four inconclusive samples in the window of twenty leave the job at exit 0."""
    d = run([v("rate", Band.STATISTICAL, Kind.INCONCLUSIVE_SAMPLE)], window=noisy_window(3, 19))
    assert d.window.inconclusive == 4
    assert (d.status, d.exit_code) == (S.INCONCLUSIVE, RET_OK)


def test_a_passing_run_still_fails_while_the_window_is_tripped():
    """A run whose own verdicts pass still exits 3 while the window holds more than the budget."""
    d = run([PASS_RATE], window=SamplerWindow().push([True] * 5 + [False] * 10))
    assert (d.status, d.exit_code) == (S.SAMPLER_BUDGET_EXCEEDED, RET_SAMPLER)
    assert d.window.recent[-1] is False


def test_deadline_fired_is_inconclusive_exit_zero():
    """Row 4: inconclusive_timeout neither blocks nor draws (INCONCLUSIVE, exit 0)."""
    d = run([v("shape", Band.CONTRACT, Kind.INCONCLUSIVE_TIMEOUT), PASS_SAFE])
    assert (d.status, d.exit_code) == (S.INCONCLUSIVE, RET_OK)
    assert d.ledger_actions == ()
    assert d.votes[0].voting


def test_safety_timeout_is_inconclusive_not_blocked():
    """An unpromoted timeout on a safety property does not block and draws nothing."""
    d = run([v("safe", Band.SAFETY, Kind.INCONCLUSIVE_TIMEOUT)])
    assert (d.status, d.exit_code, d.ledger_actions) == (S.INCONCLUSIVE, RET_OK, ())


def test_harness_error_with_credit_left_draws_and_abstains():
    """Row 5: a harness_error with credit left draws one and abstains, so the passing rest decides (exit 0)."""
    d = run([v("shape", Band.CONTRACT, Kind.HARNESS_ERROR, "daemon gone"), PASS_SAFE])
    assert (d.status, d.exit_code) == (S.ACCEPTED, RET_OK)
    vote = d.votes[0]
    assert (vote.voting, vote.ledger) == (False, LedgerAction.OPENED)


def test_only_credited_harness_errors_is_inconclusive():
    """A run whose only verdict is a credited harness_error has no voter, so it is INCONCLUSIVE, exit 0."""
    d = run([v("shape", Band.CONTRACT, Kind.HARNESS_ERROR)])
    assert (d.status, d.exit_code) == (S.INCONCLUSIVE, RET_OK)


def test_harness_error_with_credits_exhausted_exits_two():
    """Row 5b: a harness_error with no credit left breaks the job with exit 2 and still votes."""
    d = run([v("shape", Band.CONTRACT, Kind.HARNESS_ERROR, "image missing")], ledger=Ledger(budget=0))
    assert (d.status, d.exit_code) == (S.HARNESS_BROKEN, RET_HARNESS)
    assert d.votes[0].voting
    assert d.votes[0].ledger is LedgerAction.EXHAUSTED
    assert d.reasons == ("shape: harness credits exhausted (image missing)",)


def test_harness_error_on_safety_exits_two_without_a_draw():
    """Row 5c: a safety harness_error draws nothing and exits 2, with a reason saying so."""
    d = run([v("safe", Band.SAFETY, Kind.HARNESS_ERROR, "no sandbox")])
    assert (d.status, d.exit_code, d.ledger_actions) == (S.HARNESS_BROKEN, RET_HARNESS, ())
    assert d.votes[0].voting
    assert "draws no credit" in d.reasons[0]


def test_harness_error_not_proven_outside_the_patch_exits_two_without_a_draw():
    """A harness_error whose fault was not proven to come from outside the patch draws nothing and exits 2."""
    d = run([v("shape", Band.CONTRACT, Kind.HARNESS_ERROR, "supervisor gave no report", creditable=False), PASS_SAFE])
    assert (d.status, d.exit_code, d.ledger_actions) == (S.HARNESS_BROKEN, RET_HARNESS, ())
    assert "not proven outside the patch" in d.reasons[0]


def test_broad_harness_faults_draw_no_credit_and_exit_two():
    """Harness faults on more than a quarter of the properties are a broken harness: no credit at all, exit 2."""
    faults = [v(f"p{i}", Band.CONTRACT, Kind.HARNESS_ERROR, "daemon gone") for i in range(3)]
    d = run([*faults, PASS_SAFE, PASS_SHAPE, PASS_RATE])
    assert (d.status, d.exit_code, d.ledger_actions) == (S.HARNESS_BROKEN, RET_HARNESS, ())
    assert "harness faults on 3 of 6 properties" in d.reasons[0]
    assert all(vote.voting for vote in d.votes)


def test_one_fault_is_a_fault_in_one_place_whatever_the_suite_size():
    """A single faulted property draws its credit even when it is more than a quarter of a small suite."""
    d = run([v("shape", Band.CONTRACT, Kind.HARNESS_ERROR, "daemon gone"), PASS_SAFE])
    assert [e.property_id for e in d.ledger_actions] == ["shape"]
    assert (d.status, d.exit_code) == (S.ACCEPTED, RET_OK)


def test_the_fault_share_is_a_parameter():
    """With max_fault_share 0.5, two faults in six properties still draw credits."""
    faults = [v(f"p{i}", Band.CONTRACT, Kind.HARNESS_ERROR) for i in range(2)]
    verdicts = [*faults, PASS_SAFE, PASS_SHAPE, PASS_RATE, v("q", Band.CONTRACT, Kind.PASS)]
    d = decide(verdicts, frozen={}, ledger=Ledger(), window=SamplerWindow(), now=NOW, max_fault_share=0.5)
    assert len(d.ledger_actions) == 2 and d.exit_code == RET_OK


def test_empty_verdicts_are_inconclusive():
    """With no verdicts at all nothing voted, so the job is INCONCLUSIVE (never ACCEPTED)."""
    d = run([])
    assert (d.status, d.exit_code) == (S.INCONCLUSIVE, RET_OK)


# --- precedence -----------------------------------------------------------------------------------


def test_blocked_outranks_harness_broken_and_sampler():
    """When rows 1, 2 and 3 all fire, the job is BLOCKED with exit 1."""
    d = run(
        [
            v("safe", Band.SAFETY, Kind.HARNESS_ERROR),
            v("shape", Band.CONTRACT, Kind.FAIL_CONTRACT),
            v("rate", Band.STATISTICAL, Kind.INCONCLUSIVE_SAMPLE),
        ],
        window=noisy_window(4, 19),
    )
    assert (d.status, d.exit_code) == (S.BLOCKED, RET_BLOCKED)
    assert len(d.reasons) == 3


def test_harness_broken_outranks_sampler():
    """When the harness is broken and the window trips, the job is HARNESS_BROKEN with exit 2."""
    d = run(
        [v("safe", Band.SAFETY, Kind.HARNESS_ERROR), v("rate", Band.STATISTICAL, Kind.INCONCLUSIVE_SAMPLE)],
        window=noisy_window(4, 19),
    )
    assert d.window.tripped
    assert (d.status, d.exit_code) == (S.HARNESS_BROKEN, RET_HARNESS)


# --- freezes --------------------------------------------------------------------------------------


def test_frozen_property_does_not_vote_and_keeps_its_kind():
    """A frozen property's verdict stays on its vote but it does not vote."""
    d = run([v("shape", Band.CONTRACT, Kind.FAIL_CONTRACT), PASS_SAFE], frozen={"shape": "fz-1"})
    vote = d.votes[0]
    assert (vote.kind, vote.voting, vote.frozen_by, vote.ledger) == (Kind.FAIL_CONTRACT, False, "fz-1", None)
    assert (d.status, d.exit_code) == (S.ACCEPTED, RET_OK)


def test_frozen_harness_error_draws_no_credit():
    """A frozen property's harness_error draws nothing from the ledger."""
    d = run([v("shape", Band.CONTRACT, Kind.HARNESS_ERROR)], frozen={"shape": "fz-1"}, ledger=Ledger(budget=0))
    assert d.ledger_actions == ()
    assert (d.status, d.exit_code) == (S.INCONCLUSIVE, RET_OK)


def test_frozen_statistical_property_does_not_count_in_the_window():
    """A frozen statistical property's inconclusive_sample is not pushed into the window."""
    window = noisy_window(4, 19)
    d = run([v("rate", Band.STATISTICAL, Kind.INCONCLUSIVE_SAMPLE)], frozen={"rate": "fz-1"}, window=window)
    assert d.window == window
    assert (d.status, d.exit_code) == (S.INCONCLUSIVE, RET_OK)


def test_freeze_of_an_absent_property_changes_nothing():
    """A freeze naming a property not in this run's verdicts has no effect."""
    assert run([PASS_SAFE], frozen={"ghost": "fz-1"}).status is S.ACCEPTED


# --- the window -----------------------------------------------------------------------------------


def test_only_voting_statistical_verdicts_enter_the_window():
    """Safety and contract verdicts and credited statistical harness_errors never enter the window."""
    d = run(
        [
            PASS_SAFE,
            v("shape", Band.CONTRACT, Kind.INCONCLUSIVE_TIMEOUT),
            v("r1", Band.STATISTICAL, Kind.HARNESS_ERROR),
            v("r2", Band.STATISTICAL, Kind.INCONCLUSIVE_SAMPLE),
            v("r3", Band.STATISTICAL, Kind.PASS),
            v("r4", Band.STATISTICAL, Kind.INCONCLUSIVE_TIMEOUT),
        ]
    )
    assert d.window.recent == (True, False, False)


def test_exhausted_statistical_harness_error_counts_as_a_clean_window_entry():
    """A statistical harness_error with credits exhausted votes, and enters the window as not-inconclusive."""
    d = run([v("r", Band.STATISTICAL, Kind.HARNESS_ERROR)], ledger=Ledger(budget=0))
    assert d.window.recent == (False,)


def test_window_size_and_budget_come_from_the_given_window():
    """decide honours the given window's size and budget (here 1 allowed in 3)."""
    window = SamplerWindow(size=3, max_inconclusive=1).push([True])
    d = run([v("r", Band.STATISTICAL, Kind.INCONCLUSIVE_SAMPLE)], window=window)
    assert (d.status, d.exit_code) == (S.SAMPLER_BUDGET_EXCEEDED, RET_SAMPLER)
    assert "(budget 1 in 3)" in d.reasons[-1]


def test_decide_returns_the_updated_ledger():
    """The decision carries the ledger after this run's draws, for the next run to use."""
    rest = [v(f"p{i}", Band.CONTRACT, Kind.PASS) for i in range(6)]  # two faults in eight: not a broad failure
    d = run([v("a", Band.CONTRACT, Kind.HARNESS_ERROR), v("b", Band.STATISTICAL, Kind.HARNESS_ERROR), *rest])
    assert {pid: c.remaining for pid, c in d.ledger.credits.items()} == {"a": 1, "b": 1}
    assert d.ledger.credits["a"].expires_at == NOW + timedelta(hours=6)


def test_votes_keep_verdict_order():
    """One vote per verdict, in the verdicts' order."""
    vs = [v(f"p{i}", Band.CONTRACT, Kind.PASS) for i in range(5)]
    assert [vote.property_id for vote in run(vs).votes] == [f"p{i}" for i in range(5)]


# --- hypothesis over whole runs -------------------------------------------------------------------

verdict_st = st.builds(
    v,
    st.sampled_from(["a", "b", "c", "d", "e"]),
    st.sampled_from(list(Band)),
    st.sampled_from(list(Kind)),
    creditable=st.booleans(),
)
run_st = st.tuples(
    st.lists(verdict_st, max_size=8, unique_by=lambda x: x.property_id),
    st.sets(st.sampled_from(["a", "b", "c", "d", "e"])),
    st.integers(0, 3),
    st.lists(st.booleans(), max_size=25),
)


def run_case(case):
    """Decide one generated case: (verdicts, frozen ids, credit budget, window history)."""
    verdicts, frozen_ids, budget, history = case
    frozen = {p: "fz" for p in frozen_ids}
    return verdicts, run(verdicts, frozen=frozen, ledger=Ledger(budget=budget), window=SamplerWindow().push(history))


@given(run_st)
def test_decide_matches_the_decision_table(case):
    """For any run, status and exit code follow the table's rows with precedence 1 > 2 > 3."""
    verdicts, frozen_ids, budget, history = case
    frozen = {pid: "fz" for pid in frozen_ids}
    window = SamplerWindow().push(history)
    d = run(verdicts, frozen=frozen, ledger=Ledger(budget=budget), window=window)
    live = [x for x in verdicts if x.property_id not in frozen]
    blocked = any(x.kind in (Kind.FAIL_SAFETY, Kind.FAIL_CONTRACT) for x in live)
    harness = [x for x in live if x.kind is Kind.HARNESS_ERROR]
    broad = len(harness) > 1 and len(harness) > 0.25 * len(live)
    drawers = [] if broad else [x for x in harness if x.band is not Band.SAFETY and x.creditable]
    credited = drawers if budget > 0 else []
    broken = broad or any(x not in drawers for x in harness) or (budget == 0 and bool(drawers))
    sampled = [x.kind is Kind.INCONCLUSIVE_SAMPLE for x in live if x.band is Band.STATISTICAL and x not in credited]
    tripped = window.push(sampled).tripped
    voters = [x for x in live if x not in credited]
    if blocked:
        expected = (S.BLOCKED, RET_BLOCKED)
    elif broken:
        expected = (S.HARNESS_BROKEN, RET_HARNESS)
    elif tripped:
        expected = (S.SAMPLER_BUDGET_EXCEEDED, RET_SAMPLER)
    elif voters and all(x.kind is Kind.PASS for x in voters):
        expected = (S.ACCEPTED, RET_OK)
    else:
        expected = (S.INCONCLUSIVE, RET_OK)
    assert (d.status, d.exit_code) == expected


@given(run_st)
def test_frozen_properties_never_vote_draw_or_sample(case):
    """Frozen properties never vote, never draw a credit and never reach the window."""
    verdicts, frozen_ids, budget, history = case
    frozen = {pid: f"fz-{pid}" for pid in frozen_ids}
    window = SamplerWindow(size=100).push(history)
    d = run(verdicts, frozen=frozen, ledger=Ledger(budget=budget), window=window)
    for vote in d.votes:
        if vote.property_id in frozen:
            assert (vote.voting, vote.frozen_by, vote.ledger) == (False, frozen[vote.property_id], None)
        else:
            assert vote.frozen_by is None
    assert not {e.property_id for e in d.ledger_actions} & set(frozen)
    live_stat = [x for x in verdicts if x.property_id not in frozen and x.band is Band.STATISTICAL]
    assert len(d.window.recent) - len(window.recent) <= len(live_stat)


@given(run_st)
def test_only_non_safety_unfrozen_harness_errors_draw(case):
    """The ledger actions are one per unfrozen, non-safety harness_error proven outside the patch, in
    order, and none at all when faults are broad."""
    verdicts, frozen_ids, budget, history = case
    frozen = {pid: "fz" for pid in frozen_ids}
    d = run(verdicts, frozen=frozen, ledger=Ledger(budget=budget), window=SamplerWindow().push(history))
    live = [x for x in verdicts if x.property_id not in frozen]
    harness = [x for x in live if x.kind is Kind.HARNESS_ERROR]
    broad = len(harness) > 1 and len(harness) > 0.25 * len(live)
    expected = [] if broad else [x.property_id for x in harness if x.band is not Band.SAFETY and x.creditable]
    assert [e.property_id for e in d.ledger_actions] == expected


@given(run_st)
def test_exit_zero_means_accepted_or_inconclusive_and_accepted_means_every_voter_passed(case):
    """Exit 0 is returned exactly for ACCEPTED and INCONCLUSIVE, codes stay in {0, 1, 2, 3}, and ACCEPTED
    implies at least one vote and that every voting property passed."""
    verdicts, d = run_case(case)
    assert d.exit_code in (RET_OK, RET_BLOCKED, RET_HARNESS, RET_SAMPLER)
    assert (d.exit_code == RET_OK) == (d.status in (S.ACCEPTED, S.INCONCLUSIVE))
    assert len(d.votes) == len(verdicts)
    if d.status is S.ACCEPTED:
        voters = [vote for vote in d.votes if vote.voting]
        assert voters
        assert all(vote.kind is Kind.PASS for vote in voters)


@pytest.mark.parametrize("kind", list(Kind))
def test_a_safety_verdict_always_votes_unless_frozen(kind):
    """An unfrozen safety verdict votes whatever its kind (a safety harness_error is never credited)."""
    assert run([v("safe", Band.SAFETY, kind)]).votes[0].voting


def test_oracle_edits_block_the_job_whatever_the_verdicts():
    """A patch that edits oracle files is blocked (exit 1) even when every property passed, and says why."""
    d = decide(
        [PASS_SAFE, PASS_SHAPE],
        frozen={},
        ledger=Ledger(),
        window=SamplerWindow(),
        now=NOW,
        oracle_edits=("checks.py",),
    )
    assert (d.status, d.exit_code) == (S.BLOCKED, RET_BLOCKED)
    assert d.reasons == ("the patch edits oracle files: checks.py",)
