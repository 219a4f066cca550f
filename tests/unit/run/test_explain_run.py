"""`gate flakes explain` above the sandbox (gate.run.explain): the properties it refuses before any trial,
and a property explained through a mock executor, with a lost trial counted and never judged."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.judging import in_process
from support.mini_suite import CONTRACT, SAFETY, STAT, Suite, build_suite, good

from gate.core.errors import UsageError
from gate.core.policy.explain import Finding
from gate.core.suite.trial import FileChange, Observation, TrialSpec
from gate.run.executors.mock import MockExecutor
from gate.run.explain import ExplainRequest, explain_flakes


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return build_suite(tmp_path)


def ask(suite: Suite, *properties: str, **fields) -> ExplainRequest:
    r = suite.request
    return ExplainRequest(suite=r.suite, workdir=r.workdir, seal=r.seal, properties=properties, **fields)


def explain(suite: Suite, handler, *properties: str, **fields):
    executor = MockExecutor(handler)
    return explain_flakes(
        ask(suite, *properties, **fields),
        executor_factory=lambda _: executor,
        judge_factory=in_process,
        run_id="explain-unit",
    )


def by_hash_seed(spec: TrialSpec, fixture: bytes) -> Observation:
    """The safety property writes outside its map exactly on odd hash seeds; the rest behave."""
    if spec.property_id == SAFETY and (spec.hash_seed or 0) % 2:
        return Observation.of(spec, exit_code=0, writes=(FileChange(path="/work/x", change="created"),))
    return good(spec, fixture)


@pytest.mark.parametrize(
    ("properties", "fields", "field"),
    [
        ((CONTRACT,), {}, "--base"),
        (("nope",), {"allow_unchecked_oracle": True}, "PROPERTY"),
        ((STAT,), {"allow_unchecked_oracle": True}, "PROPERTY"),
        ((), {"allow_unchecked_oracle": True}, "PROPERTY"),
    ],
)
def test_refused_before_any_trial(suite: Suite, properties, fields, field: str) -> None:
    """No base (nor --allow-unchecked-oracle), an unknown or statistical property, or none: a usage
    error naming the field."""

    def never(spec: TrialSpec, fixture: bytes) -> Observation:
        raise AssertionError("no trial may run")

    with pytest.raises(UsageError) as refused:
        explain(suite, never, *properties, **fields)
    assert refused.value.field == field


def test_a_hash_seed_flake_is_explained_through_the_executor(suite: Suite) -> None:
    """A safety property moved by the hash seed is named so; a steady contract beside it is steady."""
    found = {e.property_id: e for e in explain(suite, by_hash_seed, SAFETY, CONTRACT, allow_unchecked_oracle=True)}
    assert (found[SAFETY].finding, found[SAFETY].source) == (Finding.EXPLAINED, "hash_seed")
    assert found[CONTRACT].finding is Finding.STEADY


def test_a_trial_that_never_comes_back_is_a_fault_not_a_colour(suite: Suite) -> None:
    """An executor that drops every trial leaves the plan unexplained, its trials counted as faults."""
    executor = MockExecutor(good)
    executor.run = lambda specs, inputs: iter(())  # type: ignore[method-assign]
    [result] = explain_flakes(
        ask(suite, CONTRACT, allow_unchecked_oracle=True),
        executor_factory=lambda _: executor,
        judge_factory=in_process,
    )
    assert result.finding is Finding.UNEXPLAINED and result.tried[0].faults == result.trials >= 30
