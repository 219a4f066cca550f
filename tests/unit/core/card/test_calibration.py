"""gate.calibration: measured durations to proposed deadlines, the calibrated/proposal rule and baseline findings."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gate.core.card.calibration as calibration_module
from gate.core.card.calibration import (
    Calibration,
    baseline_findings,
    calibration_from_json,
    calibration_to_json,
    deadline_source,
    percentile,
    summarise,
)
from gate.core.card.card import DeadlineSource
from gate.core.errors import ConfigError
from gate.core.verdicts.verdict import Band, Kind

NOW = datetime(2026, 12, 1, 3, 17, tzinfo=UTC)
SEAL = "ab" * 32
durations = st.lists(st.floats(0.0, 100.0), min_size=1, max_size=50)


def cal(**props: list[float]) -> Calibration:
    return summarise(props, factor=2.0, seal=SEAL, now=NOW)


def test_summarise_records_p50_p95_trials_and_the_proposed_deadline():
    """p50, p95 and the trial count come from the durations; the deadline is p95 × factor."""
    c = cal(rate=[0.1 * i for i in range(1, 21)])
    t = c.properties["rate"]
    assert t.trials == 20
    assert t.p50_s == pytest.approx(1.05)
    assert t.p95_s == pytest.approx(1.905)
    assert t.deadline_s == pytest.approx(3.81)
    assert (c.seal, c.measured_at, c.factor) == (SEAL, NOW, 2.0)


def test_property_without_durations_gets_no_entry():
    """A property that measured nothing has no calibration entry (its deadline stays a proposal)."""
    assert "lost" not in cal(lost=[], ok=[0.2]).properties


@pytest.mark.parametrize("bad", [[-0.1], [float("nan")], [float("inf")]])
def test_summarise_refuses_impossible_durations(bad):
    """Negative or non-finite durations are refused, naming the property."""
    with pytest.raises(ValueError, match="property p"):
        cal(p=bad)


def test_summarise_refuses_a_non_positive_factor():
    """A factor of 0 would propose a zero deadline and is refused."""
    with pytest.raises(ValueError, match="factor"):
        summarise({"p": [1.0]}, factor=0, seal=SEAL, now=NOW)


@given(durations)
def test_percentiles_are_ordered_and_within_the_data(values):
    """min <= p50 <= p95 <= max for any durations."""
    p50, p95 = percentile(values, 50), percentile(values, 95)
    assert min(values) <= p50 <= p95 <= max(values)


@given(durations, st.floats(1.0, 5.0))
def test_proposed_deadline_is_at_least_p95_times_factor(values, factor):
    """The proposed deadline never undercuts p95 × factor (it is rounded up) and is positive."""
    t = summarise({"p": values}, factor=factor, seal=SEAL, now=NOW).properties["p"]
    assert t.deadline_s >= t.p95_s * factor - 1e-9
    assert t.deadline_s > 0


@given(st.dictionaries(st.text("abc_", min_size=1, max_size=5), durations, max_size=5))
def test_json_round_trip(props):
    """A calibration survives to_json/from_json unchanged."""
    c = summarise(props, factor=1.5, seal=SEAL, now=NOW)
    assert calibration_from_json(calibration_to_json(c)) == c


@pytest.mark.parametrize(
    "text", ["not json", "{}", '{"schema_version": 2, "seal": "x", "measured_at": "2026-01-01T00:00:00Z"}']
)
def test_bad_json_is_one_config_error_naming_the_file(text):
    """Malformed, incomplete or future-version documents are a ConfigError naming the source file."""
    with pytest.raises(ConfigError) as info:
        calibration_from_json(text, source="calibration.json")
    assert "calibration.json" in str(info.value)


def test_deadline_at_or_above_the_proposal_under_the_same_seal_is_calibrated():
    """A deadline >= the proposed deadline of a calibration of this seal is calibrated."""
    c = cal(p=[1.0] * 10)
    assert deadline_source("p", 2.0, c, SEAL) is DeadlineSource.CALIBRATED
    assert deadline_source("p", 5.0, c, SEAL) == "calibrated"


@pytest.mark.parametrize(
    ("prop", "deadline", "seal"),
    [("p", 1.99, SEAL), ("p", 2.0, "cd" * 32), ("other", 9.0, SEAL)],
)
def test_anything_else_is_a_proposal(prop, deadline, seal):
    """A tighter deadline, another seal or a property not measured stays a proposal."""
    assert deadline_source(prop, deadline, cal(p=[1.0] * 10), seal) is DeadlineSource.PROPOSAL


def test_no_calibration_is_a_proposal():
    """Without a calibration every deadline is a proposal."""
    assert deadline_source("p", 100.0, None, SEAL) is DeadlineSource.PROPOSAL


def test_baseline_flags_a_failing_safety_or_contract_property_as_wrong():
    """fail_safety / fail_contract on the unpatched tree means the property itself is wrong."""
    found = baseline_findings(
        {"s": Kind.FAIL_SAFETY, "c": Kind.FAIL_CONTRACT, "ok": Kind.PASS},
        {"s": Band.SAFETY, "c": Band.CONTRACT, "ok": Band.CONTRACT},
    )
    assert found == [
        "c: contract property fails on the unpatched tree (fail_contract): the property is wrong",
        "s: safety property fails on the unpatched tree (fail_safety): the property is wrong",
    ]


@pytest.mark.parametrize("band", list(Band))
def test_baseline_flags_a_harness_error_as_a_broken_harness(band):
    """harness_error on the unpatched tree, in any band, means the harness is broken."""
    assert baseline_findings({"h": Kind.HARNESS_ERROR}, {"h": band}) == [
        "h: harness_error on the unpatched tree: the harness is broken"
    ]


def test_baseline_flags_timeouts_and_ignores_sampler_noise():
    """A timeout says the deadline is too tight; passes and inconclusive samples are not findings."""
    found = baseline_findings(
        {"t": Kind.INCONCLUSIVE_TIMEOUT, "r": Kind.INCONCLUSIVE_SAMPLE, "p": Kind.PASS},
        {"t": Band.CONTRACT, "r": Band.STATISTICAL, "p": Band.SAFETY},
    )
    assert found == ["t: deadline fired on the unpatched tree: the deadline is too tight"]


def test_baseline_refuses_a_property_without_a_band():
    """A verdict for a property with no band is a caller bug, not a silent skip."""
    with pytest.raises(ValueError, match="no band"):
        baseline_findings({"x": Kind.PASS}, {})


def test_calibration_module_is_pure():
    """gate.calibration imports no logging, service or filesystem module and reads no clock."""
    source = Path(calibration_module.__file__).read_text()
    tree = ast.parse(source)
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names.isdisjoint({"logging", "structlog", "docker", "celery", "redis", "os", "pathlib", "worker"})
    assert ".now(" not in source and "time.time(" not in source


@pytest.mark.parametrize("band", list(Band))
def test_a_check_that_raises_on_the_base_is_a_broken_suite(band):
    """A check that raises on the unpatched tree's output is reported as a broken suite, in every band."""
    found = baseline_findings({"x": Kind.FAIL_CONTRACT, "y": Kind.PASS}, {"x": band, "y": band}, raised={"x"})
    assert found == ["x: its check raises on the unpatched tree's output: the suite is broken"]
