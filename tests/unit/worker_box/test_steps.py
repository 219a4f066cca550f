"""The supervisor's step split (worker/box/steps.py): kept only when asked, and off it reads no clock."""

from __future__ import annotations

import time

import pytest

from worker.box.steps import Steps


def test_steps_off_read_no_clock_and_keep_nothing(monkeypatch: pytest.MonkeyPatch):
    """Off (a batch that did not ask for `timings`), start, stop and put never call time.monotonic."""

    def no_clock() -> float:
        raise AssertionError("the clock was read for a split nobody asked for")

    monkeypatch.setattr(time, "monotonic", no_clock)
    steps = Steps()
    steps.stop("layer", steps.start())
    steps.put("probe", 0.25)
    assert steps.seconds == {}


def test_steps_on_keep_each_step_in_seconds():
    """On, each step is kept by name, rounded to the microsecond."""
    steps = Steps(on=True)
    steps.stop("layer", steps.start())
    steps.put("probe", 0.1234567)
    assert set(steps.seconds) == {"layer", "probe"}
    assert 0 <= steps.seconds["layer"] < 1 and steps.seconds["probe"] == 0.123457
