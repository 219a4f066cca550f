"""The local pool's run scope: a run opened on the executor keeps its sandbox open across waves,
and a run nobody opened is scoped to one `run` call; both end with the sandbox closed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gate.core.suite.trial import Limits, Observation, TrialSpec
from gate.core.testing import make_specs
from gate.run.executors.base import opened
from gate.run.executors.local import LocalExecutor
from worker.host.sandboxes.stub import StubSandbox


class Inputs:
    def tree_dir(self, digest: str) -> Path:
        return Path("/nonexistent")

    def fixture_bytes(self, digest: str) -> bytes:
        return b"{}"


class Recording(StubSandbox):
    """A StubSandbox that writes down every lifecycle call, in order."""

    def __init__(self) -> None:
        super().__init__()  # a clean exit for every trial
        self.calls: list[tuple] = []

    def open(self, run_id: str) -> None:
        self.calls.append(("open", run_id))

    def prestart(self, run_id: str, limits: Limits, count: int) -> None:
        self.calls.append(("prestart", run_id, count))

    def close(self, run_id: str) -> int:
        self.calls.append(("close", run_id))
        return 0

    def abort(self, run_id: str) -> int:
        self.calls.append(("abort", run_id))
        return 0


def specs(run_id: str, n: int, start: int = 0) -> list[TrialSpec]:
    return make_specs(n, first=start, run_id=run_id, deadline_s=1.0)


def test_opened_run_stays_open_across_waves() -> None:
    """Between executor.open and executor.close the sandbox is opened once and closed once, however many waves."""
    sandbox = Recording()
    executor = LocalExecutor(sandbox, jobs=3)
    executor.open("r", Limits())
    for wave in range(3):
        assert len(list(executor.run(specs("r", 5, 5 * wave), Inputs()))) == 5
    assert sandbox.calls == [("open", "r"), ("prestart", "r", 3)]
    executor.close("r")
    assert sandbox.calls[-1] == ("close", "r")


def test_unopened_run_is_scoped_to_one_call() -> None:
    """A run nobody opened is opened and closed around a single `run` call, and nothing is prestarted."""
    sandbox = Recording()
    observed = list(LocalExecutor(sandbox, jobs=2).run(specs("r", 4), Inputs()))
    assert len(observed) == 4
    assert sandbox.calls == [("open", "r"), ("close", "r")]


def test_abandoned_run_aborts_its_containers() -> None:
    """Stopping mid-run (a decided property, Ctrl-C) aborts the run in the sandbox before closing it."""
    sandbox = Recording()
    executor = LocalExecutor(sandbox, jobs=1, batch_size=1)
    executor.open("r", Limits())
    stream = executor.run(specs("r", 3), Inputs())
    next(stream)
    stream.close()
    executor.close("r")
    assert ("abort", "r") in sandbox.calls
    assert sandbox.calls[-1] == ("close", "r")


def test_sandbox_that_raises_gives_harness_faults() -> None:
    """A sandbox raising instead of reporting turns its batch into harness faults, never a pass."""
    sandbox = StubSandbox(lambda spec, _: (_ for _ in ()).throw(RuntimeError("boom")))
    observed = list(LocalExecutor(sandbox, jobs=1).run(specs("r", 2), Inputs()))
    assert [o.fault for o in observed] == ["sandbox raised RuntimeError: boom"] * 2


@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_prestart_count_follows_jobs(jobs: int) -> None:
    """The local pool asks for one prestarted container per job it runs."""
    sandbox = Recording()
    LocalExecutor(sandbox, jobs=jobs).open("r", Limits())
    assert ("prestart", "r", jobs) in sandbox.calls


class Hanging(Recording):
    """Its first batch answers at once; every other batch runs until the run is aborted (a hanging probe
    whose container the abort removes), or 30 s."""

    def __init__(self) -> None:
        super().__init__()
        self.aborted = threading.Event()
        self.first = threading.Lock()

    def run_batch(self, specs: list[TrialSpec], inputs) -> list[Observation]:
        if not self.first.acquire(blocking=False):
            self.aborted.wait(30)
        return [Observation.of(spec, exit_code=0) for spec in specs]

    def abort(self, run_id: str) -> int:
        self.aborted.set()
        return super().abort(run_id)


def test_ctrl_c_while_judging_aborts_the_run_and_frees_its_threads() -> None:
    """Ctrl-C landing while the caller judges an observation (the executor's generator paused at a yield,
    where no `except` of its own sees it) still aborts the run, and the trials still running on pool
    threads end at once instead of running out their deadlines. (CI saw runs outlive Ctrl-C by 30 s:
    the run was closed, not aborted, and its threads went on starting containers.)"""
    sandbox = Hanging()
    executor = LocalExecutor(sandbox, jobs=3, batch_size=1)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), opened(executor, "r", Limits()):
        for _ in executor.run(specs("r", 6), Inputs()):
            raise KeyboardInterrupt  # the signal arrives while the first observation is judged
    assert ("abort", "r") in sandbox.calls and ("close", "r") not in sandbox.calls
    busy = [t for t in threading.enumerate() if t.name.startswith("trial")]
    for thread in busy:
        thread.join(5)
    assert not any(t.is_alive() for t in busy)
    assert time.monotonic() - started < 5
