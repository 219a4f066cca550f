"""Progress of a run: the callback seam in gate.run (driven by run_waves through run_gate over a MockExecutor)
and the rich bars gate.cli draws only on a terminal; no Docker."""

from __future__ import annotations

import importlib
import io
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from support.judging import in_process
from support.mini_suite import CONTRACT, NOW, RUN_ID, SAFETY, STAT, Handler, Suite, build_suite, good

from gate.cli.main import main
from gate.cli.progress import TerminalProgress, progress_for
from gate.core.errors import SandboxError
from gate.core.suite.trial import Observation, Side, TrialSpec
from gate.core.verdicts.verdict import Kind, OutcomeKind
from gate.run.baseline import run_baseline
from gate.run.executors.mock import MockExecutor
from gate.run.progress import NO_PROGRESS, Progress
from gate.run.request import RunResult
from gate.run.runner import run_gate

SPRT_LINE = 'rule = "sprt"\np0 = 0.9\np1 = 0.6\nalpha = 0.05\nbeta = 0.05\nmax_trials = 40\nwave = 5\n'


class Recorder:
    """A Progress that writes down every call."""

    def __init__(self) -> None:
        self.planned_calls: list[tuple[str, int]] = []
        self.done_calls: list[tuple[str, OutcomeKind]] = []
        self.finished_calls = 0

    def planned(self, property_id: str, trials: int) -> None:
        self.planned_calls.append((property_id, trials))

    def done(self, property_id: str, outcome: OutcomeKind, trial_index: int, side: Side = Side.PATCH) -> None:
        self.done_calls.append((property_id, outcome))

    def finished(self) -> None:
        self.finished_calls += 1

    def last_planned(self) -> dict[str, int]:
        return dict(self.planned_calls)


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    """The mini three-band suite (safety, contract, statistical 8 of 10) in tmp_path."""
    return build_suite(tmp_path)


def go(suite: Suite, handler: Handler, progress: Progress) -> tuple[RunResult, MockExecutor]:
    executor = MockExecutor(handler)
    result = run_gate(
        suite.request,
        executor_factory=lambda _: executor,
        judge_factory=in_process,
        now=lambda: NOW,
        run_id=RUN_ID,
        emit=lambda _: None,
        progress=progress,
    )
    return result, executor


def test_planned_and_done_match_the_trials_run(suite: Suite) -> None:
    """run_gate tells the progress each property's planned total and one `done` per judged trial, matching
    the card's trial counts, then `finished` exactly once."""
    recorder = Recorder()
    result, _ = go(suite, good, recorder)
    trials = {row.id: row.trials for row in result.card.properties}
    assert trials == {SAFETY: 1, CONTRACT: 1, STAT: 10}
    assert recorder.last_planned() == trials
    assert Counter(pid for pid, _ in recorder.done_calls) == Counter(trials)
    assert {kind for _, kind in recorder.done_calls} == {OutcomeKind.HIT}
    assert recorder.finished_calls == 1


def test_sprt_raises_the_planned_total_wave_by_wave(suite: Suite) -> None:
    """A statistical property under SPRT (waves of 5) is planned 5, then 10; the last total is the trials run."""
    toml = suite.request.suite
    toml.write_text(toml.read_text() + SPRT_LINE)
    recorder = Recorder()
    result, executor = go(suite, good, recorder)
    stat = next(row for row in result.card.properties if row.id == STAT)
    assert stat.kind is Kind.PASS
    assert [n for pid, n in recorder.planned_calls if pid == STAT] == [5, 10]
    assert stat.trials == 10
    assert sum(1 for pid, _ in recorder.done_calls if pid == STAT) == 10
    assert [c for c in executor.calls if c[0] == "run"] == [("run", "7"), ("run", "5")]
    assert recorder.finished_calls == 1


def test_finished_is_called_when_the_executor_fails(suite: Suite) -> None:
    """An executor that raises mid-run still ends the progress once, and the card is written."""

    def boom(spec: TrialSpec, fixture: bytes) -> Observation:
        if spec.property_id == STAT:
            raise SandboxError("daemon gone")
        return good(spec, fixture)

    recorder = Recorder()
    result, _ = go(suite, boom, recorder)
    assert recorder.finished_calls == 1
    assert {row.kind for row in result.card.properties} == {Kind.HARNESS_ERROR}
    assert suite.card.exists()


def test_no_progress_off_a_terminal() -> None:
    """A stream that is not a terminal gets the no-op progress."""
    assert progress_for(io.StringIO()) is NO_PROGRESS


def test_terminal_progress_draws_counts_and_totals() -> None:
    """On a (forced) terminal the bars show each property's run/planned and the overall total as it grows."""
    out = io.StringIO()
    bars = TerminalProgress(Console(file=out, force_terminal=True, width=100))
    bars.planned("alpha", 1)
    bars.planned("[bold]beta", 5)
    bars.done("alpha", OutcomeKind.HIT, 0)
    bars.planned("[bold]beta", 10)
    for index in range(10):
        bars.done("[bold]beta", OutcomeKind.MISS, index)
    bars.finished()
    text = out.getvalue()
    assert "11/11" in text and "10/10" in text and "1/1" in text
    assert "[bold]beta" in text  # a property id is text, never markup


def test_run_off_a_terminal_prints_no_progress_and_no_escapes(
    suite: Suite, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], keep_logging: None
) -> None:
    """`gate run` with stderr not a terminal (even with FORCE_COLOR set) draws no bars and prints the summary
    without a single escape sequence."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    # gate.cli exports the function `main`, which hides the module of that name from a dotted path.
    monkeypatch.setattr(
        importlib.import_module("gate.cli.runcommands"), "executor_factory", lambda _: lambda _: MockExecutor(good)
    )
    request = suite.request
    argv = ["run", "--suite", str(request.suite), "--workdir", str(request.workdir), "--seal", str(request.seal)]
    argv += ["--card", str(suite.card), "--new-ledger"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert "all trials" not in err
    assert "job: accepted (exit 0)" in err
    assert STAT in err and "10/10" in err


def test_baseline_reports_progress_like_a_run(suite: Suite, tmp_path: Path) -> None:
    """`gate baseline` hands its progress to the run: one planned total per property and one `done` per trial."""
    recorder = Recorder()
    executor = MockExecutor(good)
    code = run_baseline(
        replace(suite.request, new_ledger=False),
        tmp_path / "calibration.json",
        out=io.StringIO(),
        now=lambda: NOW,
        executor_factory=lambda _: executor,
        judge_factory=in_process,
        progress=recorder,
    )
    assert code == 0
    assert recorder.last_planned() == {SAFETY: 1, CONTRACT: 1, STAT: 10}
    assert len(recorder.done_calls) == 12 and recorder.finished_calls == 1
