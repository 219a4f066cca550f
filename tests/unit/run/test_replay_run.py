"""Statistical replays in the run's own cross-check code, over an in-process fleet of worker callables
(`tests/support/fleet_model.py`): adversarial liars on all trials, on just enough, on any set they like (even one
chosen knowing the seed), a single worker, two workers with no third, and honest fleets."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from support.fleet_model import Answer, FakeFleet, RowResult, run_row, specs_for, truth

from gate.core.suite.trial import TrialSpec
from gate.core.trust.crosscheck_summary import summary_lines
from gate.core.trust.replay import unreplayed
from gate.core.verdicts.bands import FixedRule
from gate.core.verdicts.verdict import Kind

RULE = FixedRule()
Truth = Callable[[TrialSpec], bool]  # the default band: 8 hits of 10


def names(n: int) -> list[str]:
    return ["liar", *(f"h{k}" for k in range(1, n))]


def fleet_with(n: int, liar: Answer, rate: float, rng: random.Random, *, strict: bool = True) -> FakeFleet:
    honest = truth(rate)
    return FakeFleet(
        {w: (liar if w == "liar" else (lambda spec, _w: honest(spec))) for w in names(n)}, rng, strict=strict
    )


def row(n: int, liar: Answer, rate: float, run_id: str, *, share: float = 0.05, strict: bool = True) -> RowResult:
    rng = random.Random(run_id)
    return run_row(
        fleet_with(n, liar, rate, rng, strict=strict), specs_for(run_id, RULE), RULE, share=share, seed=run_id
    )


def true_kind(rate: float, run_id: str) -> Kind:
    hits = sum(truth(rate)(s) for s in specs_for(run_id, RULE))
    return Kind.PASS if hits >= RULE.min_hits else Kind.INCONCLUSIVE_SAMPLE


def always(spec: TrialSpec, worker: str) -> bool:
    return True


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 4), st.sampled_from([0.5, 0.7, 0.75]), st.text(min_size=1, max_size=6), st.data())
def test_whatever_trials_one_liar_lies_on_the_row_passes_only_when_the_truth_does(
    n: int, rate: float, run_id: str, data: st.DataObject
) -> None:
    """Adversarial, the bound itself: a liar flipping any set of trials (its own primaries, replays it runs,
    a set picked knowing the replay seed) passes the row only when the seeded truth has 8 hits anyway."""
    lies = data.draw(st.sets(st.integers(0, RULE.trials - 1)))
    honest = truth(rate)

    def liar(spec: TrialSpec, worker: str) -> bool:
        return not honest(spec) if spec.trial_index in lies else honest(spec)

    result = row(n, liar, rate, run_id)
    if result.kind is Kind.PASS:
        assert true_kind(rate, run_id) is Kind.PASS


def test_a_liar_on_every_trial_beside_two_honest_workers_is_caught_and_its_results_run_again() -> None:
    """Adversarial: the third worker settles the dispute, the liar is discarded, every trial it counted is run
    again on the others, and the row is what the truth makes it."""
    for run_id in (f"all-{n}" for n in range(30)):
        result = row(3, always, 0.7, run_id)
        if result.summary.disagreements:
            assert result.summary.discarded == ("liar",) and result.summary.reran >= 1
            assert result.kind is true_kind(0.7, run_id)


def test_two_workers_that_disagree_with_no_third_leave_the_row_unable_to_pass() -> None:
    """Adversarial: no tie-break: the disputed trial is an unproven fault, the row a harness_error."""
    result = row(2, always, 0.0, "two")  # the truth is all misses: every lie is a dispute
    assert result.summary.unresolved and result.summary.discarded == ()
    assert result.kind is Kind.HARNESS_ERROR


def test_a_liar_on_just_enough_trials_never_passes_a_failing_row() -> None:
    """Adversarial: the liar knows every trial's truth (it can run them all: it knows the seeds) and flips
    the fewest of its own misses that lift the pooled hits to the band."""
    passed = 0
    for run_id in (f"enough-{n}" for n in range(200)):
        specs = specs_for(run_id, RULE)
        honest = truth(0.7)
        need = RULE.min_hits - sum(honest(s) for s in specs)
        own = [s.trial_index for n, s in enumerate(specs) if n % 2 == 0 and not honest(s)]  # worker 0: the liar
        lies = set(own[: max(0, need)])

        def liar(spec: TrialSpec, worker: str, lies: set[int] = lies, honest: Truth = honest) -> bool:
            return True if spec.trial_index in lies else honest(spec)

        result = row(2, liar, 0.7, run_id)
        if result.kind is Kind.PASS:
            passed += 1
            assert need <= 0  # only rows whose truth passes
    assert passed > 0  # honest passes still pass


def test_a_liar_cannot_tell_a_replay_from_a_primary() -> None:
    """Every trial a worker is asked to run again is the very spec of its primary (seed, canary, index), so
    a liar lying only on trials it takes for unreplayed has nothing to go on."""
    fleet = fleet_with(3, always, 0.5, random.Random(1))
    run_row(fleet, specs_for("same", RULE), RULE, share=1.0, seed="same")
    by_key: dict[tuple[str, str, int], list[TrialSpec]] = {}
    for _worker, spec in fleet.seen:
        by_key.setdefault(spec.key, []).append(spec)
    assert all(len(runs) >= 2 for runs in by_key.values())  # share 1: every trial ran again
    assert all(all(spec == runs[0] for spec in runs) for runs in by_key.values())


def test_honest_fleets_never_dispute_and_give_the_rows_the_truth_gives() -> None:
    """Honest workers agree on every replay (the probe draws from the seed): no dispute, no fault, same kind."""
    for run_id in (f"honest-{n}" for n in range(40)):
        result = row(3, lambda spec, _w: truth(0.8)(spec), 0.8, run_id)
        assert result.summary.disagreements == () and result.kind is true_kind(0.8, run_id)


def test_one_enrolled_worker_has_nobody_to_replay_on_so_its_statistical_rows_cannot_pass() -> None:
    """With enrolled workers a chosen replay that never ran elsewhere is unproven (as a safety cross-check
    is): the row cannot pass and the card says the statistical rows went unchecked."""
    result = row(1, lambda spec, _w: True, 1.0, "alone")
    assert result.kind is Kind.HARNESS_ERROR
    assert "statistical rows unchecked" in result.summary.note and result.summary.replays_checked == 0


def test_without_enrolment_one_worker_leaves_the_row_unchecked_and_says_so() -> None:
    """Unenrolled workers (an insecure mode accept refuses unless told): the row stands on one worker's word."""
    result = row(1, lambda spec, _w: True, 1.0, "alone", strict=False)
    assert result.kind is Kind.PASS and "statistical rows unchecked" in result.summary.note


def test_with_cross_checks_off_a_liar_buys_the_pass() -> None:
    """The defence matters: at share 0 the liar on every trial passes rows whose truth does not."""
    bought = sum(
        row(2, always, 0.7, f"off-{n}", share=0.0).kind is Kind.PASS and true_kind(0.7, f"off-{n}") is not Kind.PASS
        for n in range(60)
    )
    assert bought > 10


def test_the_card_summary_and_the_report_lines_say_what_the_replays_found() -> None:
    """Replays, unsettled disputes and discarded workers reach the summary's lines a report prints."""
    from gate.core.trust.crosscheck_summary import summary_lines

    two = row(2, always, 0.0, "lines-2").summary
    three = row(3, always, 0.0, "lines-3").summary
    text = "\n".join(summary_lines(two, {"liar": 5, "h1": 5}) + summary_lines(three, {"liar": 4, "h1": 3, "h2": 3}))
    assert "statistical replays:" in text and "unsettled replay disputes" in text
    assert "discarded workers" in text and "liar" in text
    assert type(two).model_validate_json(two.model_dump_json()) == two  # the new fields round-trip


def test_a_probe_that_ignores_the_seed_gains_nothing_and_seldom_names_an_honest_worker() -> None:
    """Adversarial: a patch drawing fresh randomness per run makes honest workers disagree on replays. Its
    rows pass no more often than a seeded probe's at the same rate, and a tie-break that sides against a
    worker (only ever one that claimed the hit, whose results are then run again) is rare."""
    runs, passed, named = 200, 0, 0
    for n in range(runs):
        noise = random.Random(f"noise-{n}")
        fresh: Answer = lambda spec, _w, noise=noise: noise.random() < 0.9  # noqa: E731
        fleet = FakeFleet(dict.fromkeys(("a", "b", "c"), fresh), random.Random(n))
        result = run_row(fleet, specs_for(f"unseeded-{n}", RULE), RULE, share=0.05, seed=f"s{n}")
        passed += result.kind is Kind.PASS
        named += bool(result.summary.quarantined)
    seeded = sum(true_kind(0.9, f"seeded-{n}") is Kind.PASS for n in range(runs))
    assert passed <= seeded and named <= runs // 20


def owned_fleet(stranger: Answer, rate: float, rng: random.Random, *, owned: bool = True) -> FakeFleet:
    """A stranger beside the operator's own worker `own` (owned, or, with `owned` False, one more stranger)."""
    honest = truth(rate)
    workers = {"stranger": stranger, "own": lambda spec, _w: honest(spec)}
    return FakeFleet(workers, rng, owned=("own",) if owned else ())


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([0.5, 0.7, 0.75, 0.95]), st.text(min_size=1, max_size=6), st.data())
def test_beside_an_owned_worker_a_liar_is_caught_and_the_row_decides_on_the_truth(
    rate: float, run_id: str, data: st.DataObject
) -> None:
    """Adversarial: a stranger flipping any set of its trials beside an owned worker never moves the row: the
    owned worker's word settles every dispute with no third worker, the stranger's results run again on it,
    and the row's kind is the seeded truth's (a pass when the truth passes, never otherwise)."""
    lies = data.draw(st.sets(st.integers(0, RULE.trials - 1), min_size=1))
    honest = truth(rate)

    def liar(spec: TrialSpec, worker: str) -> bool:
        return not honest(spec) if spec.trial_index in lies else honest(spec)

    fleet = owned_fleet(liar, rate, random.Random(run_id))
    result = run_row(fleet, specs_for(run_id, RULE), RULE, share=0.05, seed=run_id)
    if result.kind is Kind.PASS:
        assert true_kind(rate, run_id) is Kind.PASS
    if result.summary.discarded:
        assert result.summary.discarded == ("stranger",) and result.kind is true_kind(rate, run_id)
    assert set(result.summary.verified_by) <= {"own"} and result.summary.trusted == ("own",)


def test_a_fleet_shrunk_to_one_stranger_decides_with_an_owned_worker_and_not_without() -> None:
    """An honest stranger and the operator's own worker: the row passes on a true rate of 0.95 in every run, and
    only the stranger's trials run a second time, all on the owned worker; the same two as strangers pass too,
    but each checks the other; and a lone owned worker decides alone, where a lone stranger cannot."""
    honest = truth(0.95)
    for n in range(20):
        run_id = f"owned-{n}"
        if true_kind(0.95, run_id) is not Kind.PASS:
            continue
        fleet = owned_fleet(lambda spec, _w: honest(spec), 0.95, random.Random(run_id))
        result = run_row(fleet, specs_for(run_id, RULE), RULE, share=0.05, seed=run_id)
        assert result.kind is Kind.PASS, result.summary
        assert all(worker == "own" for worker, _ in fleet.seen[result.primaries :])
        assert {spec.trial_index for _, spec in fleet.seen[result.primaries :]} <= {
            spec.trial_index for worker, spec in fleet.seen[: result.primaries] if worker == "stranger"
        }
        lone = FakeFleet({"own": lambda spec, _w: honest(spec)}, random.Random(run_id), owned=("own",))
        assert run_row(lone, specs_for(run_id, RULE), RULE, share=0.05, seed=run_id).kind is Kind.PASS
        alone = FakeFleet({"stranger": lambda spec, _w: honest(spec)}, random.Random(run_id))
        assert run_row(alone, specs_for(run_id, RULE), RULE, share=0.05, seed=run_id).kind is not Kind.PASS


def slipping(run_id: str, rate: float, escape: float) -> tuple[Answer, bool]:
    """The forger built against sized replays, as worker 0 of two: on a row whose truth fails it flips the count of
    its own misses whose lies the rule's sizing leaves the best chance of all going unreplayed; and whether it lied."""
    specs, honest = specs_for(run_id, RULE), truth(rate)
    true_hits = sum(honest(s) for s in specs)
    own = [s.trial_index for n, s in enumerate(specs) if n % 2 == 0 and not honest(s)]
    hits = sum(1 for n, s in enumerate(specs) if n % 2 == 0) - len(own)
    best, lies = -1.0, frozenset[int]()
    for count in range(RULE.min_hits - true_hits, len(own) + 1) if true_hits < RULE.min_hits else ():
        kept = unreplayed(hits + count, true_hits + count - RULE.min_hits, escape)
        if (chance := math.comb(kept, count) / math.comb(hits + count, count)) > best:
            best, lies = chance, frozenset(own[:count])
    return (lambda spec, _w: spec.trial_index in lies or honest(spec)), bool(lies)


def test_a_forger_built_to_slip_through_sized_replays_passes_a_failing_row_no_more_often_than_stated() -> None:
    """Adversarial: beside an honest stranger, and beside an owned worker, the slipping forger lies on every row whose
    truth it can lift; at escape 0 it passes none of them, at 0.2 at most a fifth (within 3 s.e.), and the card
    and its report lines record the escape."""
    for escape in (0.0, 0.2):
        for owned in (False, True):
            tried = bought = 0
            for n in range(250):
                run_id = f"slip-{n}"
                liar, lied = slipping(run_id, 0.7, escape)
                workers = {"liar": liar, "other": lambda spec, _w: truth(0.7)(spec)}
                fleet = FakeFleet(workers, random.Random(run_id), owned=("other",) if owned else ())
                result = run_row(fleet, specs_for(run_id, RULE), RULE, share=0.05, seed=run_id, escape=escape)
                assert result.summary.replay_escape == escape
                assert (f"replay_escape {escape:g}" in "\n".join(summary_lines(result.summary, {}))) == (escape > 0)
                tried += lied
                bought += lied and result.kind is Kind.PASS
            assert tried > 50
            assert bought <= escape * tried + 3 * math.sqrt(escape * (1 - escape) * tried), (escape, owned, bought)


class DealtFleet(FakeFleet):
    """The row's primaries as readiness dealing leaves them to a liar answering at once: the honest worker `h1`
    keeps the first `kept` (those it was sent before the liar took its last turns), the liar runs the rest."""

    def __init__(self, liar: Answer, rate: float, rng: random.Random, kept: int) -> None:
        honest = truth(rate)
        super().__init__({"liar": liar, "h1": lambda spec, _w: honest(spec)}, rng)
        self.kept = kept

    def run(self, specs, inputs):  # type: ignore[no-untyped-def]
        for n, spec in enumerate(specs):
            yield self._answer(spec, "h1" if n < self.kept else "liar")


def test_an_instant_liar_that_drew_most_of_the_row_buys_it_only_without_replays() -> None:
    """Adversarial, readiness dealing: a liar on every trial that answered at once and so drew all but 0 to 2 of
    the row's trials passes a row whose truth fails only with the replays off (the defence); with them on, a
    pass is always the truth's."""
    bought = {0.05: 0, 0.0: 0}
    for kept in (0, 1, 2):
        for n in range(40):
            run_id = f"dealt-{kept}-{n}"
            for share in bought:
                fleet = DealtFleet(always, 0.7, random.Random(run_id), kept)
                result = run_row(fleet, specs_for(run_id, RULE), RULE, share=share, seed=run_id)
                bought[share] += result.kind is Kind.PASS and true_kind(0.7, run_id) is not Kind.PASS
    assert bought[0.05] == 0 and bought[0.0] > 30, bought
