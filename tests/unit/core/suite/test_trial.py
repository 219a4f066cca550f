"""The seam models: the frozen clock's faketimerc text, zone validation, trial keys."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from gate.core.suite.trial import Captured, ClockSpec, FaultOrigin, Observation, Side
from gate.core.testing import make_spec


def test_faketimerc_in_utc_is_the_instant() -> None:
    """In UTC the faketimerc line is the instant itself."""
    assert ClockSpec(frozen_at=datetime(2026, 3, 1, tzinfo=UTC)).faketimerc() == "2026-03-01 00:00:00"


def test_faketimerc_is_wall_time_in_the_zone() -> None:
    """libfaketime parses the file as local time, so a New York clock writes New York wall time."""
    clock = ClockSpec(frozen_at=datetime(2026, 3, 1, tzinfo=UTC), zone="America/New_York")
    assert clock.faketimerc() == "2026-02-28 19:00:00"


def test_unknown_zone_is_refused() -> None:
    """A zone the tz database does not know is a validation error naming it."""
    with pytest.raises(ValidationError, match="unknown time zone"):
        ClockSpec(frozen_at=datetime(2026, 3, 1, tzinfo=UTC), zone="Mars/Olympus")


def test_naive_instant_is_refused() -> None:
    """An instant without an offset is refused: the clock must say which moment it means."""
    with pytest.raises(ValidationError, match="explicit offset"):
        ClockSpec(frozen_at=datetime(2026, 3, 1))


def test_trial_and_observation_share_a_key() -> None:
    """A spec and its observation are matched by (run, property, trial index, side)."""
    spec = make_spec(3, run_id="r", property_id="p")
    assert Observation.harness_fault(spec, "x", origin=FaultOrigin.HARNESS).key == spec.key == ("r", "p", 3, Side.PATCH)


def test_observation_round_trips_bytes_through_json() -> None:
    """Captured bytes survive JSON (base64), as they must across a broker."""
    obs = Observation(
        run_id="r", property_id="p", trial_index=0, stdout=Captured(data=b"\x00\xffok", length=10, sha256="0" * 64)
    )
    assert Observation.model_validate_json(obs.model_dump_json()) == obs
    assert obs.stdout.truncated
