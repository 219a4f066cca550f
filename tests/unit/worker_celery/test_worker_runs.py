"""worker.celery.worker.runs: a worker process opens a run on its first batch and closes it once idle or at exit."""

from __future__ import annotations

import pytest

from worker.celery.worker.runs import OpenRuns, run_idle_s
from worker.celery.worker.settings import PoolSettings, configure


class Recorder:
    """A sandbox that only records which runs were opened and closed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def open(self, run_id: str) -> None:
        self.calls.append(("open", run_id))

    def close(self, run_id: str) -> int:
        self.calls.append(("close", run_id))
        return 0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(idle_s: float = 20.0) -> tuple[OpenRuns, Recorder, Clock]:
    box, clock = Recorder(), Clock()
    runs = OpenRuns(lambda: box, idle_s, clock=clock)  # type: ignore[arg-type,return-value]
    runs._start_janitor = lambda: None  # type: ignore[method-assign]  # the tests drive close_idle
    return runs, box, clock


def test_a_run_is_opened_once_across_batches():
    """Only the first batch of a run opens it in the sandbox."""
    runs, box, _ = make()
    for _ in range(3):
        with runs.serving({"r1"}):
            pass
    assert box.calls == [("open", "r1")]


def test_an_idle_run_is_closed_after_idle_s_and_not_before():
    """A run with no batch in flight is closed once its last batch ended `idle_s` ago."""
    runs, box, clock = make(idle_s=20.0)
    with runs.serving({"r1"}):
        pass
    clock.now += 19.0
    assert runs.close_idle() == []
    clock.now += 1.0
    assert runs.close_idle() == ["r1"]
    assert box.calls == [("open", "r1"), ("close", "r1")]
    assert runs.open_runs() == []


def test_a_run_in_flight_is_never_closed_as_idle():
    """However long a batch runs, the janitor leaves its run open."""
    runs, box, clock = make(idle_s=2.0)
    with runs.serving({"r1"}):
        clock.now += 60.0
        assert runs.close_idle() == []
    assert ("close", "r1") not in box.calls


def test_a_closed_run_is_opened_again_by_its_next_batch():
    """A late batch of a run the janitor closed opens it afresh."""
    runs, box, clock = make(idle_s=2.0)
    with runs.serving({"r1"}):
        pass
    clock.now += 5.0
    runs.close_idle()
    with runs.serving({"r1"}):
        pass
    assert box.calls == [("open", "r1"), ("close", "r1"), ("open", "r1")]


def test_close_all_closes_every_run_even_in_flight():
    """At process exit every open run is closed."""
    runs, box, _ = make()
    with runs.serving({"r1"}):
        pass
    with runs.serving({"r2"}):
        assert sorted(runs.close_all()) == ["r1", "r2"]
    assert sorted(c for c in box.calls if c[0] == "close") == [("close", "r1"), ("close", "r2")]


def test_a_failing_close_does_not_stop_the_janitor():
    """A sandbox whose close raises still has the run forgotten, and other runs closed."""
    runs, box, clock = make(idle_s=1.0)

    def broken(run_id: str) -> int:
        raise RuntimeError("daemon gone")

    box.close = broken  # type: ignore[method-assign]
    for run_id in ("r1", "r2"):
        with runs.serving({run_id}):
            pass
    clock.now += 2.0
    assert sorted(runs.close_idle()) == ["r1", "r2"]
    assert runs.open_runs() == []


@pytest.mark.parametrize("raw", ["0", "-1", "40", "soon"])
def test_run_idle_s_refuses_values_outside_the_hosts_window(monkeypatch, raw):
    """PROBEGATE_RUN_IDLE_S must be a positive number of seconds below HOST_IDLE_S."""
    configure(PoolSettings.from_env({"PROBEGATE_RUN_IDLE_S": raw}))
    with pytest.raises(ValueError, match="PROBEGATE_RUN_IDLE_S"):
        run_idle_s()


def test_run_idle_s_defaults_to_twenty_seconds(monkeypatch):
    """Without the variable a run stays open 20 s after its last batch."""
    configure(PoolSettings.from_env({}))
    assert run_idle_s() == 20.0
