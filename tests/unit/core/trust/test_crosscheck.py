"""gate.core.trust.crosscheck and gate.core.trust.hitrate: the choice of trials, the worse-counts pairing, the
tie-break that quarantines only on reproduced facts, the canary search and the hit-rate test."""

from __future__ import annotations

import hashlib
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.suite.trial import Captured, FileChange, Observation
from gate.core.testing import make_spec
from gate.core.trust.crosscheck import (
    REPRODUCE,
    Settled,
    choose,
    combine,
    differing,
    picked,
    settle,
    with_coordinator_canary,
    worse,
)
from gate.core.trust.crosscheck_summary import summarize, summary_lines
from gate.core.trust.hitrate import ALPHA, fisher_two_sided, outliers
from gate.core.verdicts.verdict import Band, Outcome, OutcomeKind

SPEC = make_spec(3, property_id="p", canary="c4n4ry-0123456789abcdef")


def captured(text: str) -> Captured:
    data = text.encode()
    return Captured(data=data, length=len(data), sha256=hashlib.sha256(data).hexdigest())


def obs(worker: str, out: str = "ok", *, writes: tuple[str, ...] = (), **facts: object) -> Observation:
    changes = tuple(FileChange(path=p, change="created") for p in writes)
    return Observation.of(SPEC, exit_code=0, stdout=captured(out), writes=changes, worker_id=worker, **facts)


def outcome(kind: OutcomeKind, detail: str = "") -> Outcome:
    return Outcome(trial_index=SPEC.trial_index, kind=kind, detail=detail)


HIT, MISS = outcome(OutcomeKind.HIT), outcome(OutcomeKind.MISS, "write outside the write map: created /etc/x")


def test_choice_takes_about_the_share_and_at_least_one_per_safety_and_contract_property() -> None:
    """The seed picks about `share` of each property's trials, at least one of each safety/contract
    property, and none of a statistical one (those get the hit-rate test)."""
    trials = {
        "s": (Band.SAFETY, list(range(2000))),
        "c": (Band.CONTRACT, [0]),
        "r": (Band.STATISTICAL, list(range(100))),
    }
    chosen = choose("seed-1", trials, 0.05)
    assert 60 <= len(chosen["s"]) <= 140
    assert chosen["c"] == (0,)
    assert "r" not in chosen
    assert choose("seed-1", trials, 0.0) == {}
    assert len(choose("seed-1", trials, 1.0)["s"]) == 2000


def test_choice_depends_on_the_coordinators_seed_not_on_anything_a_worker_sees() -> None:
    """Two seeds pick different trials; the same seed picks the same ones (auditable afterwards)."""
    trials = {"s": (Band.SAFETY, list(range(500)))}
    assert choose("a", trials, 0.1) == choose("a", trials, 0.1)
    assert choose("a", trials, 0.1) != choose("b", trials, 0.1)
    assert picked("a", "s", 7, 1.0) and not picked("a", "s", 7, 0.0)


def test_a_worker_reporting_pass_where_the_honest_one_saw_a_miss_loses_and_both_are_named() -> None:
    """Adversarial: a fabricated clean pass against an honest miss: the miss counts (with its
    observation, so a re-fold agrees) and the disagreement names both workers and the facts."""
    honest = obs("honest", writes=("/etc/x",))
    liar = obs("liar")
    pair = combine((liar, HIT), (honest, MISS))
    assert pair.outcome == MISS and pair.observation == honest
    assert pair.disagreement is not None
    assert {s.worker for s in pair.disagreement.sides} == {"liar", "honest"}
    assert pair.disagreement.facts == ("writes",) and pair.disagreement.counted is OutcomeKind.MISS
    assert "liar hit" in pair.disagreement.line() or "liar" in pair.disagreement.line()


def test_agreeing_workers_leave_no_disagreement_and_facts_alone_make_one() -> None:
    """Same outcome and facts: no disagreement; same outcome, different stdout: a fact disagreement."""
    assert combine((obs("a"), HIT), (obs("b"), HIT)).disagreement is None
    pair = combine((obs("a", "x"), HIT), (obs("b", "y"), HIT))
    assert pair.disagreement is not None and pair.disagreement.facts == ("stdout",)
    assert differing(obs("a"), obs("b", canary_seen=True)) == ("canary_seen",)


KINDS = st.sampled_from(list(OutcomeKind))
RANKED = [OutcomeKind.HIT, OutcomeKind.TIMEOUT, OutcomeKind.FAULT, OutcomeKind.MISS]


@given(KINDS, KINDS, st.text(max_size=5), st.text(max_size=5), st.text(max_size=3), st.text(max_size=3))
def test_combine_is_never_better_than_either_input_and_symmetric(ka, kb, da, db, oa, ob) -> None:
    """Property: the counted outcome ranks at least as bad as both inputs, and swapping which worker
    came first changes neither what counts nor the recorded disagreement."""
    a, b = Outcome(trial_index=3, kind=ka, detail=da), Outcome(trial_index=3, kind=kb, detail=db)
    first, second = (obs("w1", oa), a), (obs("w2", ob), b)
    one, two = combine(first, second), combine(second, first)
    assert RANKED.index(one.outcome.kind) >= max(RANKED.index(ka), RANKED.index(kb))
    assert one == two
    assert worse(a, b) == worse(b, a)


def test_tie_break_quarantines_the_side_a_deterministic_third_worker_contradicts() -> None:
    """Adversarial: the third worker reproduces the honest facts on each of its runs: the other side
    is quarantined, naming whom it sided with."""
    honest, liar = obs("honest", writes=("/etc/x",)), obs("liar")
    third = [obs("third", writes=("/etc/x",)) for _ in range(REPRODUCE)]
    result = settle(liar, honest, third)
    assert (result.settled, result.quarantined, result.sided_with) == (Settled.QUARANTINE, "liar", "honest")
    assert settle(honest, liar, third).quarantined == "liar"


def test_a_probe_whose_output_varies_by_itself_quarantines_nobody() -> None:
    """Adversarial: a patch that prints the time/addresses: the third worker's own runs differ, or match
    neither side: nondeterministic, nobody quarantined, however the sides line up."""
    a, b = obs("a", "t=1"), obs("b", "t=2")
    own_runs_differ = settle(a, b, [obs("c", "t=1"), obs("c", "t=3")])
    assert own_runs_differ.settled is Settled.NONDETERMINISTIC and own_runs_differ.quarantined is None
    neither = settle(a, b, [obs("c", "t=9"), obs("c", "t=9")])
    assert neither.settled is Settled.NONDETERMINISTIC and neither.quarantined is None


def test_tie_break_without_enough_runs_from_one_third_worker_settles_nothing() -> None:
    """One rerun, reruns from the disputing workers themselves, or from two third workers: unresolved."""
    a, b = obs("a", "x"), obs("b", "y")
    assert settle(a, b, [obs("c", "x")]).settled is Settled.UNRESOLVED
    assert settle(a, b, [obs("a", "x"), obs("a", "x")]).settled is Settled.UNRESOLVED
    assert settle(a, b, [obs("c", "x"), obs("d", "x")]).settled is Settled.UNRESOLVED
    faulted = Observation.harness_fault(SPEC, "lost", origin="harness", worker_id="c")
    assert settle(a, b, [faulted, faulted]).settled is Settled.UNRESOLVED


def test_the_coordinator_finds_a_canary_the_worker_said_was_not_there() -> None:
    """Adversarial: a worker returns the canary in stdout but reports canary_seen False: the coordinator's
    own search sets it (a safety miss for no_secret_in_output) and says the worker hid it."""
    leaked = obs("liar", f"token={SPEC.canary}")
    fixed, hidden = with_coordinator_canary(SPEC, leaked)
    assert fixed.canary_seen and hidden
    clean, hidden = with_coordinator_canary(SPEC, obs("w", "nothing here"))
    assert not clean.canary_seen and not hidden
    in_stderr = Observation.of(SPEC, exit_code=0, stderr=captured(SPEC.canary))
    assert with_coordinator_canary(SPEC, in_stderr)[0].canary_seen
    assert not with_coordinator_canary(make_spec(0), obs("w", ""))[1]  # no canary planted: nothing to find


def test_fisher_matches_a_hand_computed_table() -> None:
    """Fisher's exact two-sided p on [[3, 1], [1, 3]] is 34/70 (the textbook tea-tasting table)."""
    assert fisher_two_sided(3, 1, 1, 3) == pytest.approx(34 / 70)
    assert fisher_two_sided(0, 0, 0, 0) == 1.0
    p = fisher_two_sided(10, 0, 0, 10)
    assert p == pytest.approx(2 / comb(20, 10))


def test_a_worker_fabricating_hits_on_a_statistical_property_is_flagged_not_the_honest_ones() -> None:
    """Adversarial: one worker reports 40/40 hits where three others see about half: it alone is flagged,
    at the corrected level; workers with matching rates are not."""
    rates = {"rate": {"liar": (40, 40), "h1": (19, 40), "h2": (21, 40), "h3": (20, 40)}}
    flagged = outliers(rates)
    assert [o.worker for o in flagged] == ["liar"]
    assert flagged[0].alpha == pytest.approx(ALPHA / 4) and flagged[0].p_value < flagged[0].alpha
    assert outliers({"rate": {"a": (20, 40), "b": (21, 40)}}) == ()
    assert outliers({"rate": {"alone": (40, 40)}}) == ()


def test_the_summary_draws_quarantined_workers_and_nondeterministic_trials_from_settlements() -> None:
    """Quarantined workers and nondeterministic trials on the card come from the settlements; the report
    lines name them and the disagreements."""
    honest, liar = obs("honest", writes=("/etc/x",)), obs("liar")
    pair = combine((liar, HIT), (honest, MISS))
    settlements = [
        settle(liar, honest, [obs("third", writes=("/etc/x",))] * 2),
        settle(obs("a", "1"), obs("b", "2"), [obs("c", "3")] * 2),
    ]
    assert pair.disagreement is not None
    summary = summarize(
        share=1.0, seed="s", chosen=2, checked=2, disagreements=[pair.disagreement], settlements=settlements
    )
    assert summary.quarantined == ("liar",)
    assert [(t.property_id, t.trial_index) for t in summary.nondeterministic] == [("p", 3)]
    text = "\n".join(summary_lines(summary, {"honest": 1, "liar": 1}))
    assert "quarantined workers: liar" in text and "worker_disagreement" in text and "nondeterministic" in text
