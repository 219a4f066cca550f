"""run_gate and the books: checked before the executor opens, read and written at decision time in
one step (so a run that finished meanwhile is kept), and never touched by `gate baseline`."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.judging import in_process
from support.mini_suite import NOW, STAT, Suite, build_suite, but, good, run, run_request, stdout

from gate.core.errors import RET_NOINPUT, RET_USAGE, InputMissingError, UsageError
from gate.core.policy.ledger import Ledger
from gate.core.suite.suite import LedgerConfig, SamplerConfig
from gate.core.suite.trial import Observation, TrialSpec
from gate.core.verdicts.bands import SamplerWindow
from gate.io.ledgerfile import FileBooks
from gate.run.baseline import run_baseline
from gate.run.executors.mock import MockExecutor


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return build_suite(tmp_path)


def six_of_ten(spec: TrialSpec, fixture: bytes) -> Observation:
    """The statistical property lands 6 of 10 hits: inconclusive_sample, a True in the window."""
    tool = json.loads(fixture)["expected_tool"] if spec.trial_index < 6 else "search.web"
    return Observation.of(spec, exit_code=0, stdout=stdout({"tool": tool}))


def refused_before_the_executor(suite: Suite, *, new_ledger: bool, error: type[Exception]) -> Exception:
    executor = MockExecutor(good)
    request = replace(suite.request, new_ledger=new_ledger)
    with pytest.raises(error) as info:
        run_request(request, executor)
    assert executor.calls == []  # refused before the executor opened: no container
    return info.value


def test_a_missing_ledger_refuses_the_run_before_any_trial(suite: Suite) -> None:
    """Without --new-ledger a run on a missing ledger exits 66 naming it, before the executor opens."""
    exc = refused_before_the_executor(suite, new_ledger=False, error=InputMissingError)
    assert exc.exit_code == RET_NOINPUT and str(suite.ledger) in str(exc) and "--new-ledger" in str(exc)
    assert not suite.ledger.exists() and not suite.card.exists()


def test_new_ledger_over_real_books_refuses_the_run_before_any_trial(suite: Suite) -> None:
    """--new-ledger where books exist exits 64 before the executor opens, and the books stay as they were."""
    run(suite, good)
    before = suite.ledger.read_bytes()
    exc = refused_before_the_executor(suite, new_ledger=True, error=UsageError)
    assert exc.exit_code == RET_USAGE and "--new-ledger" in str(exc)
    assert suite.ledger.read_bytes() == before


def test_books_are_read_at_decision_time_so_a_run_that_finished_meanwhile_is_kept(suite: Suite) -> None:
    """A run that wrote the books while this one's trials ran keeps its credit and window entry; this
    run adds its own."""
    other = FileBooks(suite.ledger, LedgerConfig(), SamplerConfig(), create=True)
    wrote: list[str] = []

    def other_run(ledger: Ledger, window: SamplerWindow) -> tuple[str, Ledger, SamplerWindow]:
        return "decided", ledger.draw("other", "fault", NOW)[0], window.push([False])

    def meanwhile(spec: TrialSpec, fixture: bytes) -> Observation:
        if not wrote:  # another run on the same ledger decides mid-way through this one
            wrote.append(other.update(other_run))
        return six_of_ten(spec, fixture)

    result, _ = run(suite, but(STAT, meanwhile))
    books = json.loads(suite.ledger.read_text())
    assert set(books["credits"]) == {"other"}
    assert books["sampler_window"] == [False, True]
    assert result.card.policy.window_before.recent == (False,)  # the card records the books it decided on


def test_baseline_never_touches_the_real_books(suite: Suite, tmp_path: Path) -> None:
    """`gate baseline` decides on scratch books in memory: no ledger is created, an existing one is unchanged."""
    calibration = tmp_path / "calibration.json"

    def baseline() -> int:
        executor = MockExecutor(but(STAT, six_of_ten))
        request = replace(suite.request, new_ledger=False)
        return run_baseline(
            request,
            calibration,
            out=io.StringIO(),
            now=lambda: NOW,
            executor_factory=lambda _: executor,
            judge_factory=in_process,
        )

    baseline()
    assert not suite.ledger.exists()
    run(suite, good)
    before = suite.ledger.read_bytes()
    baseline()
    assert suite.ledger.read_bytes() == before


def test_books_that_could_not_be_written_back_refuse_the_run_before_any_trial(suite: Suite) -> None:
    """A credit whose last_detail is a lone surrogate reads as JSON, but no UTF-8 file (nor the card's
    policy inputs) can hold it: the run refuses at the books' check, before the executor opens, so no
    run is lost after its trials (issue 26). Exit 65 naming the field; the books stay as they were."""
    from gate.core.errors import RET_CONFIG, ConfigError

    suite.ledger.parent.mkdir(parents=True, exist_ok=True)
    books = {
        "credits": {STAT: {"property_id": STAT, "remaining": 1, "expires_at": "2099-01-01T00:00:00Z",
                           "last_detail": "\\ud800"}},
        "sampler_window": [],
    }  # fmt: skip
    suite.ledger.write_text(json.dumps(books).replace("\\\\ud800", "\\ud800"))
    before = suite.ledger.read_bytes()
    exc = refused_before_the_executor(suite, new_ledger=False, error=ConfigError)
    assert exc.exit_code == RET_CONFIG and "last_detail" in str(exc) and str(exc).isprintable()
    assert suite.ledger.read_bytes() == before and not suite.card.exists()
