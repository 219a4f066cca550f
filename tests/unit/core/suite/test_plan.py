"""gate.plan: each classified property becomes its trial specs, bound to the sealed fixture digest."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.errors import SuiteError
from gate.core.suite.plan import plan
from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import ClockSpec, Limits

CLOCK = ClockSpec(frozen_at=datetime(2026, 3, 1, tzinfo=UTC))
MANIFEST = {"inv.json": "1" * 64, "tools/q.json": "2" * 64}


def prop(pid, band, fixture="inv.json", **kw):
    return PropertySpec(id=pid, band=band, fixture=fixture, check="checks:fn", **kw)


def make(props, manifest=MANIFEST, **kw):
    return plan(
        props,
        run_id="run-1",
        probe_argv=("python3", "probe.py"),
        tree_digest="t" * 64,
        manifest=manifest,
        clock=CLOCK,
        limits=Limits(),
        **kw,
    )


def test_safety_and_contract_plan_one_trial_each():
    """A safety or a contract property is planned as exactly one trial, index 0."""
    specs = make([prop("s", "safety"), prop("c", "contract")])
    assert [(s.property_id, s.trial_index) for s in specs] == [("s", 0), ("c", 0)]


def test_statistical_default_plans_ten_trials():
    """A statistical property without trials is planned as the default 10 trials, indices 0..9."""
    specs = make([prop("r", "statistical", fixture="tools/q.json")])
    assert [s.trial_index for s in specs] == list(range(10))


@given(st.integers(1, 200))
def test_statistical_plans_its_declared_trials(n):
    """A statistical property with `trials = n` is planned as n trials with distinct indices 0..n-1."""
    specs = make([prop("r", "statistical", trials=n, min_hits=0)])
    assert [s.trial_index for s in specs] == list(range(n))
    assert len({s.key for s in specs}) == n


def test_specs_follow_suite_order():
    """Trial specs come out in the suite's property order, each property's trials together."""
    specs = make([prop("c", "contract"), prop("r", "statistical", trials=2, min_hits=1), prop("s", "safety")])
    assert [s.property_id for s in specs] == ["c", "r", "r", "s"]


def test_specs_bind_the_sealed_fixture_digest_and_run_values():
    """Each spec carries the fixture's sealed digest, the tree digest, run id, clock, limits and deadline."""
    [spec] = make([prop("c", "contract", fixture="tools/q.json", deadline_s=3.5)])
    assert spec.fixture_path == "tools/q.json"
    assert spec.fixture_digest == "2" * 64
    assert (spec.run_id, spec.tree_digest, spec.probe_argv) == ("run-1", "t" * 64, ("python3", "probe.py"))
    assert (spec.clock, spec.limits, spec.deadline_s) == (CLOCK, Limits(), 3.5)


def test_fixture_missing_from_the_manifest_is_refused_naming_the_property():
    """A property whose fixture is not in the sealed tree raises SuiteError naming the file, property and fixture."""
    with pytest.raises(SuiteError) as info:
        make([prop("c", "contract"), prop("ghosty", "safety", fixture="nope.json")], suite_file="suite/gate.toml")
    text = str(info.value)
    assert "suite/gate.toml" in text
    assert "property ghosty" in text
    assert "'nope.json'" in text
    assert info.value.field == "property ghosty"


def test_fixture_check_happens_before_any_spec_is_returned():
    """A missing fixture late in the suite refuses the whole plan (no partial list)."""
    with pytest.raises(SuiteError):
        make([prop("ok", "statistical"), prop("bad", "contract", fixture="missing")])


def test_empty_suite_plans_nothing():
    """No properties, no trial specs."""
    assert make([]) == []
