"""The explain plan against simulated probes: each moved by one source (or two), by none, or by the residual."""

from __future__ import annotations

import random
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from gate.core.policy.explain import BUDGET, STEADY_N, Finding, Showed, bound, stop_rule
from gate.core.policy.explaining import Explainer
from gate.core.policy.sources import ALL_FIXED, ALL_VARY, SOURCES, Source, Variant, vary
from gate.core.suite.trial import Interpreter, TrialSpec
from gate.core.testing import make_spec
from gate.core.verdicts.verdict import Outcome, OutcomeKind

Probe = Callable[[TrialSpec, random.Random], bool]  # hit or miss, from the knobs the trial ran with


def noise(spec: TrialSpec, rng: random.Random, on: bool, key: int) -> bool:
    """A bit that varies when `on`, else one fixed by `key`."""
    return rng.random() < 0.5 if on else key % 2 == 0


PROBES: dict[str, Probe] = {
    Source.TRIAL_SEED: lambda s, r: s.seed % 2 == 0,
    Source.HASH_SEED: lambda s, r: (s.hash_seed or 0) % 2 == 0,
    Source.ASLR: lambda s, r: noise(s, r, s.aslr, 1),
    Source.CPUS: lambda s, r: s.limits.cpus >= 1.0,
    Source.CLOCK: lambda s, r: noise(s, r, s.clock_ticks, 0),
    Source.INTERPRETER: lambda s, r: s.interpreter is Interpreter.WARM,
}


def explain(probe: Probe, *, seed: int = 7, fault_every: int = 0, budget: int = BUDGET) -> tuple[Explainer, int]:
    """Drive an Explainer with `probe` judging each trial; returns it and how many chunks it asked for."""
    rng = random.Random(seed)
    explainer = Explainer("p", budget=budget)
    fixed_seed = make_spec(0, seed=seed * 1_000_003).seed
    chunks = 0
    while (chunk := explainer.next_chunk()) is not None:
        chunks += 1
        outcomes = []
        for index in range(chunk.start, chunk.start + chunk.count):
            spec = vary(make_spec(index, seed=rng.getrandbits(52)), chunk.variant, fixed_seed=fixed_seed)
            if fault_every and index % fault_every == 0:
                kind = OutcomeKind.FAULT
            else:
                kind = OutcomeKind.HIT if probe(spec, rng) else OutcomeKind.MISS
            outcomes.append(Outcome(trial_index=index, kind=kind))
        explainer.record(outcomes)
    return explainer, chunks


def test_each_single_source_is_named_within_the_budget() -> None:
    """A probe moved by one source is explained by that source alone, in at most 200 trials."""
    for source, probe in PROBES.items():
        result = explain(probe)[0].explanation()
        assert (result.finding, result.source) == (Finding.EXPLAINED, source), result.words
        assert result.trials <= BUDGET
        assert result.steady_with is not None and result.steady_with.fixed == (source,)
        assert [t.varied for t in result.flickers_with] == [(source,)]


@settings(max_examples=30, deadline=None)
@given(source=st.sampled_from(SOURCES), seed=st.integers(0, 10_000))
def test_any_seed_names_the_source(source: Source, seed: int) -> None:
    """Whatever the seeds drawn, a single-source probe is named right and within the budget."""
    result = explain(PROBES[source], seed=seed)[0].explanation()
    assert result.source == source and result.trials <= BUDGET


def test_two_sources_are_named_together() -> None:
    """A probe that takes the trial seed and the hash seed together is explained by both."""
    result = explain(lambda s, r: (s.seed + (s.hash_seed or 0)) % 2 == 0)[0].explanation()
    assert (result.finding, result.source) == (Finding.EXPLAINED, "trial_seed+hash_seed"), result.words
    assert len(result.flickers_with) == 2 and result.trials <= BUDGET


def test_entropy_the_sandbox_does_not_control_is_the_residual() -> None:
    """A probe that flickers with everything fixed is named the residual, cheaply."""
    result = explain(lambda s, r: r.random() < 0.5)[0].explanation()
    assert (result.finding, result.source) == (Finding.RESIDUAL, "residual")
    assert result.trials < 2 * STEADY_N and "os.urandom" in result.words


def test_a_steady_property_is_never_explained() -> None:
    """All hits with every source varying is `steady`, never a cause."""
    result = explain(lambda s, r: True)[0].explanation()
    assert result.finding is Finding.STEADY and result.source == "" and result.trials == STEADY_N


def test_the_budget_ends_an_explanation_unexplained() -> None:
    """Out of trials before the plan ends: unexplained, with what was tried, never over budget."""
    result = explain(PROBES[Source.INTERPRETER], budget=50)[0].explanation()
    assert result.finding is Finding.UNEXPLAINED and result.trials <= 50
    assert result.tried[-1].showed is Showed.UNFINISHED and "budget" in result.words


def test_faults_are_not_observations() -> None:
    """Faulted trials show no colour: the claims still rest on observed trials."""
    result = explain(PROBES[Source.HASH_SEED], fault_every=5)[0].explanation()
    assert result.source == Source.HASH_SEED
    assert result.steady_with is not None and result.steady_with.hits + result.steady_with.misses == STEADY_N


def test_a_harness_that_only_faults_explains_nothing() -> None:
    """Every trial faulting ends the plan unexplained at the first variant."""
    result = explain(PROBES[Source.HASH_SEED], fault_every=1)[0].explanation()
    assert result.finding is Finding.UNEXPLAINED and STEADY_N <= result.trials < 2 * STEADY_N


def test_the_words_carry_the_fix() -> None:
    """The hash-seed sentence says steady with one hash seed, and to sort before comparing."""
    words = explain(PROBES[Source.HASH_SEED])[0].explanation().words
    assert "with one hash seed" in words and "sort before comparing" in words and "30/30" in words


def test_stop_rule() -> None:
    """Two colours flicker at once; one colour is steady only at n observed trials; faults wait."""
    hit, miss, fault = (Outcome(trial_index=0, kind=k) for k in (OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.FAULT))
    assert stop_rule([hit, miss], 30) is Showed.FLICKERS
    assert stop_rule([hit] * 29 + [fault], 30) is None
    assert stop_rule([hit] * 30, 30) is Showed.STEADY
    assert 0.09 < bound(30) < 0.1 and abs(bound(40) - 3 / 40) < 0.003


def test_vary_holds_fixed_sources_at_one_value() -> None:
    """All fixed: every trial gets the same seed, hash seed, frozen clock, no ASLR, full CPUs."""
    specs = [vary(make_spec(i, seed=i * 17), ALL_FIXED, fixed_seed=5) for i in range(4)]
    assert {(s.seed, s.hash_seed, s.clock_ticks, s.aslr, s.limits.cpus, s.interpreter) for s in specs} == {
        (5, specs[0].hash_seed, False, False, 1.0, Interpreter.FRESH)
    }
    varied = [vary(make_spec(i, seed=i * 17), ALL_VARY, fixed_seed=5) for i in range(4)]
    assert len({s.seed for s in varied}) == len({s.hash_seed for s in varied}) == 4
    assert {s.interpreter for s in varied} == set(Interpreter) and {s.limits.cpus for s in varied} == {1.0, 0.125}
    assert all(s.clock_ticks and s.aslr for s in varied)
    assert Variant(frozenset({Source.CLOCK})).label().startswith("fixed: clock; varied: trial_seed")
