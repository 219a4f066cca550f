"""Baseline calibration: per-property trial durations measured on the unpatched tree, the deadlines
they support, and what a baseline run's verdicts say about the suite itself.

Pure: durations, seal and time come in as values; JSON goes in and out as strings (reading and
writing the calibration file is the caller's job).

The rule for `deadline_source`: a property's deadline is *calibrated* only when a calibration
exists, was measured under the same fixture seal as this run, holds an entry for the property,
and the deadline is at least that entry's proposed deadline (p95 × factor). Anything else — no
calibration, another seal, no entry, or a deadline tighter than the proposal — is a *proposal*,
and a timeout on it can only be inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gate.core.card.card import DeadlineSource
from gate.core.errors import ConfigError
from gate.core.verdicts.verdict import Band, Kind

CALIBRATION_SCHEMA_VERSION = 1
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class PropertyTiming(BaseModel):
    """One property's measured trial durations on the unpatched tree and the deadline they support."""

    model_config = _FROZEN
    p50_s: float = Field(ge=0)
    p95_s: float = Field(ge=0)
    trials: int = Field(ge=1)
    deadline_s: float = Field(gt=0)


class Calibration(BaseModel):
    """Per-property timings from one baseline run, bound to the fixture seal they were measured under."""

    model_config = _FROZEN
    schema_version: int = CALIBRATION_SCHEMA_VERSION
    seal: str = Field(min_length=1)
    measured_at: datetime
    factor: float = Field(gt=0)
    properties: dict[str, PropertyTiming]

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != CALIBRATION_SCHEMA_VERSION:
            raise ValueError(f"unknown calibration schema_version {value}")
        return value


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between order statistics."""
    if not values:
        raise ValueError("no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def proposed_deadline(p95_s: float, factor: float) -> float:
    """p95 × factor, rounded up to the millisecond and never below one millisecond."""
    return max(0.001, math.ceil(p95_s * factor * 1000 - 1e-9) / 1000)


def summarise(durations: Mapping[str, Sequence[float]], factor: float, seal: str, now: datetime) -> Calibration:
    """The calibration of one baseline run; a property with no measured trial gets no entry."""
    if factor <= 0:
        raise ValueError(f"factor {factor} must be positive")
    timings: dict[str, PropertyTiming] = {}
    for prop_id in sorted(durations):
        measured = list(durations[prop_id])
        if not measured:
            continue
        if any(d < 0 or not math.isfinite(d) for d in measured):
            raise ValueError(f"property {prop_id}: durations must be finite and non-negative")
        p95 = percentile(measured, 95)
        timings[prop_id] = PropertyTiming(
            p50_s=percentile(measured, 50),
            p95_s=p95,
            trials=len(measured),
            deadline_s=proposed_deadline(p95, factor),
        )
    return Calibration(seal=seal, measured_at=now, factor=factor, properties=timings)


def calibration_to_json(calibration: Calibration) -> str:
    """The calibration as an indented JSON document ending in a newline."""
    return calibration.model_dump_json(indent=2) + "\n"


def calibration_from_json(text: str, *, source: str | None = None) -> Calibration:
    """Parse a calibration document; any problem is one ConfigError naming `source`."""
    try:
        calibration = Calibration.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{where}: {message}" if where else message, file=source, field="calibration") from None
    if calibration.measured_at.utcoffset() is None:
        # Every calibration the gate writes is stamped in UTC; a naive one was written by hand.
        message = "measured_at: needs an explicit offset, e.g. 2026-03-01T00:00:00Z"
        raise ConfigError(message, file=source, field="calibration")
    return calibration


def deadline_source(prop_id: str, deadline_s: float, calibration: Calibration | None, seal: str) -> DeadlineSource:
    """`calibrated` when a calibration of this seal backs the deadline, else `proposal` (see module)."""
    if calibration is None or calibration.seal != seal:
        return DeadlineSource.PROPOSAL
    timing = calibration.properties.get(prop_id)
    if timing is None or deadline_s < timing.deadline_s:
        return DeadlineSource.PROPOSAL
    return DeadlineSource.CALIBRATED


def baseline_findings(
    kinds: Mapping[str, Kind], bands: Mapping[str, Band], *, raised: Collection[str] = ()
) -> list[str]:
    """What a baseline run (the unpatched tree) says is wrong with the suite, one line per problem.

    A check that raises on the unpatched tree's output is a broken suite (`raised`, in any band);
    a safety or contract property that fails there is wrong (it rejects the code it should
    accept); a harness_error there means the harness is broken. A timeout there means the
    deadline is too tight for the unpatched tree. Statistical noise is not a finding.
    """
    findings: list[str] = []
    for prop_id in sorted(kinds):
        kind = kinds[prop_id]
        if prop_id not in bands:
            raise ValueError(f"property {prop_id}: no band given")
        band = bands[prop_id]
        if prop_id in raised:
            findings.append(f"{prop_id}: its check raises on the unpatched tree's output: the suite is broken")
        elif kind in (Kind.FAIL_SAFETY, Kind.FAIL_CONTRACT) and band in (Band.SAFETY, Band.CONTRACT):
            findings.append(f"{prop_id}: {band} property fails on the unpatched tree ({kind}): the property is wrong")
        elif kind in (Kind.FAIL_SAFETY, Kind.FAIL_CONTRACT):
            findings.append(f"{prop_id}: {kind} on the unpatched tree (timeout_is_safety): the deadline is too tight")
        elif kind is Kind.HARNESS_ERROR:
            findings.append(f"{prop_id}: harness_error on the unpatched tree: the harness is broken")
        elif kind is Kind.INCONCLUSIVE_TIMEOUT:
            findings.append(f"{prop_id}: deadline fired on the unpatched tree: the deadline is too tight")
    return findings
