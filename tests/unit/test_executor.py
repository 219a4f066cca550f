"""The local pool's run scope: a run opened on the executor keeps its sandbox open across waves,
and a run nobody opened is scoped to one `run` call; both end with the sandbox closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.core.testing import MockSandbox, make_specs
from gate.core.trial import Limits, Observation, TrialSpec
from gate.run.executor import LocalExecutor


class Inputs:
    def tree_dir(self, digest: str) -> Path:
        return Path("/nonexistent")

    def fixture_bytes(self, digest: str) -> bytes:
        return b"{}"


class Recording(MockSandbox):
    """A MockSandbox that writes down every lifecycle call, in order."""

    def __init__(self) -> None:
        super().__init__(lambda spec, _: Observation.of(spec, exit_code=0))
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
    sandbox = MockSandbox(lambda spec, _: (_ for _ in ()).throw(RuntimeError("boom")))
    observed = list(LocalExecutor(sandbox, jobs=1).run(specs("r", 2), Inputs()))
    assert [o.fault for o in observed] == ["sandbox raised RuntimeError: boom"] * 2


@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_prestart_count_follows_jobs(jobs: int) -> None:
    """The local pool asks for one prestarted container per job it runs."""
    sandbox = Recording()
    LocalExecutor(sandbox, jobs=jobs).open("r", Limits())
    assert ("prestart", "r", jobs) in sandbox.calls
