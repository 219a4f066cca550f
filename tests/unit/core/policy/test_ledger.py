"""gate.ledger: harness credits — budget, TTL slots, exhaustion — and who may draw them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gate.core.errors import RET_HARNESS
from gate.core.policy.ledger import Credit, Ledger, LedgerAction
from gate.core.policy.policy import JobStatus, decide
from gate.core.testing import make_verdict
from gate.core.verdicts.bands import SamplerWindow
from gate.core.verdicts.verdict import Band, Kind

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(hours=6)
A = LedgerAction


def verdict(pid, band, kind, detail="d"):
    return make_verdict(pid, band, kind, detail)


def test_budget_two_opens_then_consumes_then_exhausts():
    """With budget 2 the first fault opens a slot, the second consumes, the third is exhausted."""
    ledger = Ledger()
    actions = []
    for minutes in (0, 1, 2):
        ledger, entry = ledger.draw("p", f"fault {minutes}", T0 + timedelta(minutes=minutes))
        actions.append((entry.action, entry.remaining))
    assert actions == [(A.OPENED, 1), (A.CONSUMED, 0), (A.EXHAUSTED, 0)]


def test_opened_slot_expires_one_ttl_after_the_first_fault():
    """A new slot expires `ttl` after the fault that opened it, and later draws keep that expiry."""
    ledger, first = Ledger().draw("p", "x", T0)
    ledger, second = ledger.draw("p", "y", T0 + timedelta(hours=1))
    assert first.expires_at == T0 + TTL
    assert second.expires_at == T0 + TTL
    assert ledger.credits["p"].expires_at == T0 + TTL


def test_slot_reopens_exactly_at_expiry():
    """A draw at the slot's expiry instant opens a fresh slot with a full budget."""
    ledger, _ = Ledger().draw("p", "x", T0)
    ledger, _ = ledger.draw("p", "x", T0)
    ledger, entry = ledger.draw("p", "after ttl", T0 + TTL)
    assert (entry.action, entry.remaining, entry.expires_at) == (A.OPENED, 1, T0 + 2 * TTL)


def test_slot_is_still_live_just_before_expiry():
    """A draw one microsecond before expiry still spends from the old slot."""
    ledger, _ = Ledger().draw("p", "x", T0)
    ledger, _ = ledger.draw("p", "x", T0)
    _, entry = ledger.draw("p", "x", T0 + TTL - timedelta(microseconds=1))
    assert entry.action is A.EXHAUSTED


def test_exhausted_slot_reopens_after_ttl():
    """An exhausted property gets a fresh budget once its slot has expired."""
    ledger = Ledger()
    for _ in range(3):
        ledger, _ = ledger.draw("p", "x", T0)
    ledger, entry = ledger.draw("p", "x", T0 + TTL + timedelta(seconds=1))
    assert entry.action is A.OPENED
    assert ledger.credits["p"].remaining == 1


def test_budget_zero_is_exhausted_at_once_and_leaves_the_ledger_unchanged():
    """With budget 0 the first fault is exhausted, and no slot is recorded."""
    ledger = Ledger(budget=0)
    after, entry = ledger.draw("p", "daemon gone", T0)
    assert entry.action is A.EXHAUSTED
    assert entry.remaining == 0
    assert after == ledger
    assert after.credits == {}


def test_budget_one_opens_then_exhausts():
    """With budget 1 the first fault opens with nothing left and the second is exhausted."""
    ledger, e1 = Ledger(budget=1).draw("p", "x", T0)
    _, e2 = ledger.draw("p", "x", T0)
    assert [(e1.action, e1.remaining), (e2.action, e2.remaining)] == [(A.OPENED, 0), (A.EXHAUSTED, 0)]


def test_properties_have_independent_slots():
    """Faults on one property do not spend another property's credits."""
    ledger = Ledger()
    ledger, _ = ledger.draw("a", "x", T0)
    ledger, _ = ledger.draw("a", "x", T0)
    ledger, entry = ledger.draw("b", "x", T0)
    assert entry.action is A.OPENED
    assert ledger.credits["a"].remaining == 0
    assert ledger.credits["b"].remaining == 1


def test_draw_does_not_mutate_the_original_ledger():
    """draw returns a new ledger and leaves the receiver untouched."""
    ledger = Ledger()
    after, _ = ledger.draw("p", "x", T0)
    assert ledger.credits == {}
    assert "p" in after.credits


def test_last_detail_is_the_latest_fault_even_when_exhausted():
    """The slot records the detail of the most recent fault, including an exhausted one."""
    ledger = Ledger(budget=1)
    ledger, _ = ledger.draw("p", "first", T0)
    ledger, entry = ledger.draw("p", "second", T0)
    assert ledger.credits["p"].last_detail == "second"
    assert entry.detail == "second"


def test_entry_and_ledger_never_say_flaky():
    """The ledger's JSON names property, remaining, expiry and detail, never the word 'flaky'."""
    ledger, entry = Ledger().draw("p", "container could not start", T0)
    text = ledger.model_dump_json() + entry.model_dump_json()
    assert "flaky" not in text.lower()
    assert set(ledger.credits["p"].model_dump()) == {"property_id", "remaining", "expires_at", "last_detail"}


def test_credit_refuses_negative_remaining():
    """A Credit with negative remaining cannot be built."""
    with pytest.raises(ValidationError):
        Credit(property_id="p", remaining=-1, expires_at=T0, last_detail="")


def test_ledger_refuses_negative_budget():
    """A ledger with a negative budget cannot be built."""
    with pytest.raises(ValidationError):
        Ledger(budget=-1)


def test_pruned_drops_expired_slots_and_keeps_live_ones():
    """pruned removes slots expired by `now` (expiry == now counts as expired) and keeps the rest."""
    ledger, _ = Ledger().draw("old", "x", T0)
    ledger, _ = ledger.draw("new", "x", T0 + timedelta(hours=1))
    pruned = ledger.pruned(T0 + TTL)
    assert set(pruned.credits) == {"new"}
    assert set(ledger.pruned(T0 + TTL - timedelta(microseconds=1)).credits) == {"old", "new"}


def test_ledger_json_round_trips():
    """A ledger dumped to JSON validates back to an equal ledger."""
    ledger, _ = Ledger(budget=3, ttl=timedelta(hours=2)).draw("p", "x", T0)
    assert Ledger.model_validate_json(ledger.model_dump_json()) == ledger


draws = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 20 * 60)),  # property, minutes since last draw
    max_size=40,
)


@given(st.integers(0, 4), st.integers(1, 12), draws)
def test_remaining_is_never_negative_and_spending_matches_a_reference_model(budget, ttl_hours, steps):
    """Over any sequence of draws, remaining stays >= 0 and each action matches a simple slot model."""
    ttl = timedelta(hours=ttl_hours)
    ledger = Ledger(budget=budget, ttl=ttl)
    model: dict[str, tuple[int, datetime]] = {}  # pid -> (remaining, expires)
    now = T0
    for pid, minutes in steps:
        now += timedelta(minutes=minutes)
        ledger, entry = ledger.draw(pid, "fault", now)
        assert entry.remaining >= 0
        assert all(c.remaining >= 0 for c in ledger.credits.values())
        slot = model.get(pid)
        if slot is None or slot[1] <= now:
            if budget == 0:
                expected = A.EXHAUSTED
            else:
                model[pid] = (budget - 1, now + ttl)
                expected = A.OPENED
        elif slot[0] == 0:
            expected = A.EXHAUSTED
        else:
            model[pid] = (slot[0] - 1, slot[1])
            expected = A.CONSUMED
        assert entry.action is expected
        if pid in model:
            assert (ledger.credits[pid].remaining, ledger.credits[pid].expires_at) == model[pid]


@given(st.integers(1, 5), st.integers(1, 30))
def test_within_one_slot_at_most_budget_faults_are_forgiven(budget, faults):
    """Inside one slot's lifetime, exactly min(budget, faults) faults are credited and the rest exhausted."""
    ledger = Ledger(budget=budget)
    credited = 0
    for i in range(faults):
        ledger, entry = ledger.draw("p", "x", T0 + timedelta(seconds=i))
        credited += entry.action in (A.OPENED, A.CONSUMED)
    assert credited == min(budget, faults)


# --- who may draw (through policy.decide) ---------------------------------------------------------


@pytest.mark.parametrize("kind", [k for k in Kind if k is not Kind.HARNESS_ERROR])
@pytest.mark.parametrize("band", [Band.CONTRACT, Band.STATISTICAL])
def test_only_harness_error_draws_a_credit(kind, band):
    """No verdict kind other than harness_error draws from the ledger."""
    d = decide([verdict("p", band, kind)], frozen={}, ledger=Ledger(), window=SamplerWindow(), now=T0)
    assert d.ledger_actions == ()
    assert d.ledger.credits == {}
    assert d.votes[0].ledger is None


@pytest.mark.parametrize("band", [Band.CONTRACT, Band.STATISTICAL])
def test_harness_error_draws_one_credit(band):
    """A contract or statistical harness_error draws one credit and records the detail."""
    d = decide(
        [verdict("p", band, Kind.HARNESS_ERROR, "image missing")],
        frozen={},
        ledger=Ledger(),
        window=SamplerWindow(),
        now=T0,
    )
    assert [(e.property_id, e.action, e.remaining, e.detail) for e in d.ledger_actions] == [
        ("p", A.OPENED, 1, "image missing")
    ]
    assert d.ledger.credits["p"].remaining == 1


def test_safety_harness_error_draws_nothing_and_exits_two():
    """A harness_error on a safety property draws no credit and breaks the job with exit 2."""
    d = decide(
        [verdict("s", Band.SAFETY, Kind.HARNESS_ERROR)], frozen={}, ledger=Ledger(), window=SamplerWindow(), now=T0
    )
    assert d.ledger_actions == ()
    assert d.ledger.credits == {}
    assert (d.status, d.exit_code) == (JobStatus.HARNESS_BROKEN, RET_HARNESS)


def test_three_runs_of_harness_errors_exhaust_the_budget_with_exit_two():
    """Three consecutive runs with a contract harness_error: exit 0, 0, then 2 once credits are gone."""
    ledger, codes = Ledger(), []
    for i in range(3):
        d = decide(
            [verdict("c", Band.CONTRACT, Kind.HARNESS_ERROR)],
            frozen={},
            ledger=ledger,
            window=SamplerWindow(),
            now=T0 + timedelta(minutes=i),
        )
        ledger = d.ledger
        codes.append((d.exit_code, d.ledger_actions[0].action))
    assert codes == [(0, A.OPENED), (0, A.CONSUMED), (RET_HARNESS, A.EXHAUSTED)]
