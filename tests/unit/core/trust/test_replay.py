"""The statistical replay rules (`gate.core.trust.replay`): the band's margin, which trials are replayed,
what a replay pair means, who is caught and what is discarded."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.suite.trial import Captured, Observation
from gate.core.testing import make_spec
from gate.core.trust.crosscheck import Settled, Settlement, Side, WorkerDisagreement
from gate.core.trust.replay import (
    StatRow,
    _point,
    caught,
    choose_replays,
    compare,
    discards,
    margin,
    on_rows,
    unproven,
    unreplayed,
)
from gate.core.verdicts.bands import FixedRule, SprtRule
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import Outcome, OutcomeKind

HIT, MISS = OutcomeKind.HIT, OutcomeKind.MISS
SPRT = SprtRule(p0=0.8, p1=0.6, max_trials=60)


def obs(index: int, worker: str, data: bytes = b"x") -> Observation:
    return Observation.of(
        make_spec(index),
        exit_code=0,
        stdout=Captured(data=data, length=len(data), sha256="s" + data.hex()),
        worker_id=worker,
    )


def outcome(index: int, kind: OutcomeKind) -> Outcome:
    return Outcome(trial_index=index, kind=kind)


rows_strategy = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans()), min_size=1, max_size=30)


def row_of(trials: list[tuple[str, bool]], rule: FixedRule) -> StatRow:
    return StatRow(rule, tuple((i, w, HIT if hit else MISS) for i, (w, hit) in enumerate(trials)))


def test_the_margin_is_the_hits_a_passing_row_can_lose_and_minus_one_below_the_band() -> None:
    """8 of 10: 7 hits do not pass (-1), 8 pass with nothing to spare, 10 spare 2."""
    rule = FixedRule()
    assert [margin(rule, h, 10) for h in (7, 8, 10)] == [-1, 0, 2]


@given(st.integers(0, 60), st.integers(1, 60))
def test_a_row_less_its_margin_still_passes_and_one_hit_fewer_does_not(hits: int, trials: int) -> None:
    """For the sequential rule too: `margin` is exactly how far the hits can fall with the row passing."""
    hits = min(hits, trials)
    spare = margin(SPRT, hits, trials)
    if spare < 0:
        assert not SPRT.decide(hits=hits, trials=trials).passed
        return
    assert SPRT.decide(hits=hits - spare, trials=trials).passed
    assert spare == hits or not SPRT.decide(hits=hits - spare - 1, trials=trials).passed


@given(rows_strategy, st.text(min_size=1, max_size=8), st.floats(0.001, 1.0))
def test_each_worker_has_a_replay_and_its_unreplayed_hits_never_exceed_a_passing_rows_margin(
    trials: list[tuple[str, bool]], seed: str, share: float
) -> None:
    """Rule 1: at least one of each worker's trials is replayed, and on a passing row no worker keeps more
    unreplayed hits than the margin: all of them could be lies and the rest would still pass."""
    rule = FixedRule(trials=len(trials), min_hits=max(0, (8 * len(trials)) // 10))
    row = row_of(trials, rule)
    picked = set(choose_replays(seed, {"p": row}, share).indices.get("p", ()))
    for worker in {w for w, _ in trials}:
        assert any(trials[i][0] == worker for i in picked)
    hits = sum(hit for _, hit in trials)
    spare = margin(rule, hits, len(trials))
    if spare >= 0:
        for worker in {w for w, _ in trials}:
            unreplayed = sum(1 for i, (w, hit) in enumerate(trials) if w == worker and hit and i not in picked)
            assert unreplayed <= spare


def test_a_share_of_zero_replays_nothing_and_a_failing_row_gets_only_its_share() -> None:
    """Share 0 turns replays off; a row below the band needs no margin replays (a lie only adds hits)."""
    failing = row_of([("a", False), ("b", False)] * 5, FixedRule())
    assert choose_replays("s", {"p": failing}, 0.0).count == 0
    choice = choose_replays("s", {"p": failing}, 0.05)
    assert choice.for_margin == 0 and choice.count == 2  # one per worker, the minimum


def test_a_row_with_a_fault_or_a_timeout_gets_no_margin_replays() -> None:
    """It cannot pass whatever its hits: only the share is replayed."""
    trials = (*((i, "ab"[i % 2], HIT) for i in range(9)), (9, "b", OutcomeKind.TIMEOUT))
    choice = choose_replays("s", {"p": StatRow(FixedRule(), trials)}, 0.05)
    assert choice.for_margin == 0


def test_which_trials_are_replayed_depends_on_the_seed_alone_and_spreads_over_the_trials() -> None:
    """The same seed picks the same trials; over many seeds every trial is picked about as often, so a
    worker that does not know the seed cannot tell which of its trials will be replayed."""
    row = row_of([("a", False), ("b", False)] * 10, FixedRule(trials=20, min_hits=16))
    assert choose_replays("s1", {"p": row}, 0.2).indices == choose_replays("s1", {"p": row}, 0.2).indices
    counts = [0] * 20
    for n in range(2000):
        for i in choose_replays(f"seed-{n}", {"p": row}, 0.2).indices["p"]:
            counts[i] += 1
    assert max(counts) < 1.3 * min(counts), counts


@given(st.sampled_from(list(OutcomeKind)), st.sampled_from(list(OutcomeKind)))
def test_a_replay_pair_counts_the_worse_outcome_and_disputes_only_a_different_outcome(
    a: OutcomeKind, b: OutcomeKind
) -> None:
    """Rule 2: never better than either side, the same whichever came first; a dispute names both."""
    first, second = (obs(0, "w1", b"one"), outcome(0, a)), (obs(0, "w2", b"two"), outcome(0, b))
    pair, swapped = compare(first, second), compare(second, first)
    assert pair == swapped
    rank = {HIT: 0, OutcomeKind.TIMEOUT: 1, OutcomeKind.FAULT: 2, MISS: 3}
    assert rank[pair.outcome.kind] == max(rank[a], rank[b])
    assert (pair.disagreement is None) == (a is b)
    if pair.disagreement is not None:
        assert {s.worker for s in pair.disagreement.sides} == {"w1", "w2"}


def test_facts_that_differ_under_equal_outcomes_are_no_dispute() -> None:
    """A statistical probe may print what it likes; only the outcome the band counts is compared."""
    pair = compare((obs(0, "w1", b"one"), outcome(0, HIT)), (obs(0, "w2", b"two"), outcome(0, HIT)))
    assert pair.disagreement is None


def settlement(settled: Settled, quarantined: str | None = None) -> Settlement:
    return Settlement(property_id="p", trial_index=0, settled=settled, quarantined=quarantined)


def test_only_a_quarantine_catches_and_anything_else_leaves_the_trial_unproven() -> None:
    """Rule 3: no third worker, a nondeterministic probe: nobody is caught and the row cannot pass."""
    settled = [
        settlement(Settled.QUARANTINE, "liar"),
        settlement(Settled.UNRESOLVED),
        settlement(Settled.NONDETERMINISTIC),
    ]
    assert caught(settled) == frozenset({"liar"})
    assert [unproven(s) for s in settled] == [False, True, True]


def test_every_counted_result_of_a_caught_worker_is_discarded() -> None:
    """Rule 4: all its trials, whichever row or role, and no one else's."""
    counted = [obs(0, "liar"), obs(1, "honest"), obs(2, "liar")]
    assert [key[2] for key in discards(counted, frozenset({"liar"}))] == [0, 2]
    assert discards(counted, frozenset()) == ()


def dispute(index: int, better: str, worse: str, prop: str = "p") -> WorkerDisagreement:
    sides = (Side(worker=better, outcome=HIT), Side(worker=worse, outcome=MISS))
    return WorkerDisagreement(property_id=prop, trial_index=index, sides=sides, counted=MISS)


def quarantine(index: int, liar: str, honest: str, prop: str = "p") -> Settlement:
    return Settlement(
        property_id=prop, trial_index=index, settled=Settled.QUARANTINE, quarantined=liar, sided_with=honest
    )


def test_a_row_with_a_nondeterministic_dispute_quarantines_nobody() -> None:
    """Rule 3, adversarial: a patch whose output ignores the seed makes honest workers disagree, and an output
    of few values can repeat on the tie-break; once any dispute on the row proves nondeterministic, none
    of the row's tie-breaks catches anyone, and every one of its disputes stays open."""
    noisy = Settlement(property_id="p", trial_index=2, settled=Settled.NONDETERMINISTIC)
    disputes = [dispute(1, "honest", "other"), dispute(2, "a", "b"), dispute(1, "liar", "honest", "q")]
    settled = on_rows([quarantine(1, "honest", "other"), noisy, quarantine(1, "liar", "honest", "q")], disputes)
    assert caught(settled) == frozenset({"liar"})
    assert [unproven(s) for s in settled] == [True, True, False]


def test_a_worker_contradicted_on_a_worse_claim_is_not_caught() -> None:
    """Rule 3: a worker whose claim only hurt the patch (a miss the tie-break did not reproduce) bought
    nothing; with a probe that ignores the seed it is most likely honest, so the dispute stays open."""
    settled = on_rows([quarantine(1, "reported_miss", "reported_hit")], [dispute(1, "reported_hit", "reported_miss")])
    assert caught(settled) == frozenset() and unproven(settled[0])


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40), st.text(min_size=1, max_size=8))
def test_a_paired_row_replays_every_pair_with_a_patch_hit_or_a_base_miss(
    pairs: list[tuple[bool, bool]], seed: str
) -> None:
    """Whatever the pairs, the only ones left unreplayed are those the patch lost (patch miss, base hit): every
    claim a lie that helps the patch can make (a patch hit, a base miss) is replayed."""
    row = StatRow(
        PairedRule(margin=0.05, alpha=0.05, beta=0.05, max_pairs=400),
        tuple((i, "w", HIT if patch else MISS) for i, (_, patch) in enumerate(pairs)),
        tuple((i, "w", HIT if base else MISS) for i, (base, _) in enumerate(pairs)),
    )
    picked = set(choose_replays(seed, {"p": row}, 0.05).indices.get("p", ()))
    assert {i for i, (base, patch) in enumerate(pairs) if patch or not base} <= picked


@given(st.integers(0, 40), st.integers(0, 40))
def test_at_escape_zero_a_worker_keeps_no_more_unreplayed_hits_than_the_margin(hits: int, spare: int) -> None:
    """The default sizing is the zero-lift rule: all but the margin of each worker's hits are replayed."""
    assert unreplayed(hits, spare, 0.0) == min(hits, spare)


@given(st.integers(0, 40), st.integers(0, 40), st.floats(0.0, 0.999))
def test_the_hits_kept_are_the_most_whose_lies_escape_at_most_the_stated_escape(
    hits: int, spare: int, escape: float
) -> None:
    """`unreplayed` is the largest count whose spare + 1 lies all go unreplayed with probability <= escape."""
    kept, lies = unreplayed(hits, spare, escape), spare + 1

    def escapes(u: int) -> Fraction:
        return Fraction(math.comb(u, lies), math.comb(hits, lies)) if hits >= lies else Fraction(0)

    assert kept <= hits and escapes(kept) <= Fraction(escape)
    assert kept == hits or escapes(kept + 1) > Fraction(escape)


def test_an_escape_outside_zero_to_one_is_refused() -> None:
    """An escape of 1 would replay nothing on purpose; a negative one means nothing."""
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="escape"):
            unreplayed(5, 1, bad)


@given(rows_strategy, st.text(min_size=1, max_size=8), st.sampled_from([0.1, 0.2, 0.5]))
def test_the_replayed_hits_of_a_worker_are_the_lowest_pointed_and_no_fewer_than_the_escape_needs(
    trials: list[tuple[str, bool]], seed: str, escape: float
) -> None:
    """On a passing row each worker's replayed hits are a prefix of its hits in the seed's order (a uniform draw
    the worker cannot foresee) and leave at most `unreplayed` of them: the two facts the escape bound rests on."""
    rule = FixedRule(trials=len(trials), min_hits=max(0, (8 * len(trials)) // 10))
    picked = set(choose_replays(seed, {"p": row_of(trials, rule)}, 0.05, escape=escape).indices.get("p", ()))
    spare = margin(rule, sum(hit for _, hit in trials), len(trials))
    if spare < 0:
        return
    for worker in {w for w, _ in trials}:
        hits = sorted(
            (i for i, (w, hit) in enumerate(trials) if w == worker and hit), key=lambda i: _point(seed, "p", i)
        )
        replayed = [i in picked for i in hits]
        assert replayed == sorted(replayed, reverse=True)
        assert replayed.count(False) <= unreplayed(len(hits), spare, escape)


def test_a_forger_placing_the_fewest_lies_that_turn_the_row_escapes_no_more_often_than_stated() -> None:
    """Adversarial, the stated bound itself: on 8 of 10 with 8 hits reported (margin 0), one worker's 5 hits hold
    one lie; over 2,000 replay seeds it goes unreplayed at most 0.2 of the time at escape 0.2 (3 s.e.), never at 0."""
    row = row_of([("liar", True), ("honest", True)] * 3 + [("liar", True), ("honest", False)] * 2, FixedRule())
    liar_hits = [i for i in range(10) if i % 2 == 0]
    for escape, most in ((0.0, 0), (0.2, 0.2)):
        for lie in liar_hits:
            free = sum(
                lie not in choose_replays(f"s{n}", {"p": row}, 0.05, escape=escape).indices["p"] for n in range(2000)
            )
            assert free / 2000 <= most + 3 * math.sqrt(most * (1 - most) / 2000), (escape, lie, free)
