"""gate.run.runner.run_gate: one whole gate run against a MockExecutor, from a small suite in tmp_path to
the card, the ledger file and the stdout lines; no Docker."""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.mini_suite import (
    CONTRACT,
    INVOICE,
    NOW,
    RUN_ID,
    SAFETY,
    STAT,
    Suite,
    build_suite,
    but,
    good,
    run,
    run_request,
    stdout,
)

from gate.core.card.acceptance import prove
from gate.core.card.stamp import verdict_lines
from gate.core.errors import SandboxError, UsageError
from gate.core.policy.ledger import LedgerAction
from gate.core.policy.policy import JobStatus
from gate.core.suite.trial import FaultOrigin, FileChange, Observation, TrialSpec
from gate.core.verdicts.verdict import Kind
from gate.io.artifacts import read_card
from gate.run.executors.mock import MockExecutor
from gate.run.request import RunRequest, RunResult


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    """A three-property suite (safety, contract, statistical 8 of 10), its sealed fixtures and a workdir."""
    return build_suite(tmp_path)


def kinds(result: RunResult) -> dict[str, Kind]:
    return {row.id: row.kind for row in result.card.properties}


def test_clean_run_is_accepted_with_the_given_run_id_clock_and_lifecycle(suite: Suite) -> None:
    """Every trial answered well gives an accepted card, exit 0, bound to the run id and clock passed in,
    between one executor open and one close."""
    specs: list[TrialSpec] = []

    def recording(spec: TrialSpec, fixture: bytes) -> Observation:
        specs.append(spec)
        return good(spec, fixture)

    result, executor = run(suite, recording)
    card = result.card
    assert card.status is JobStatus.ACCEPTED
    assert card.exit_code == 0
    assert kinds(result) == {SAFETY: Kind.PASS, CONTRACT: Kind.PASS, STAT: Kind.PASS}
    assert all(row.voting for row in card.properties)
    assert {row.id: (row.trials, row.hits) for row in card.properties} == {
        SAFETY: (1, 1),
        CONTRACT: (1, 1),
        STAT: (10, 10),
    }
    assert card.run_id == RUN_ID
    assert card.created_at == NOW
    assert card.image == "mock-image"
    assert card.image_id == "sha256:mock"
    assert card.reasons == ()
    assert executor.calls == [("open", RUN_ID), ("run", "12"), ("close", RUN_ID)]
    assert {s.run_id for s in specs} == {RUN_ID}
    assert {s.clock.frozen_at for s in specs} == {datetime(2026, 3, 1, tzinfo=UTC)}
    assert len({s.canary for s in specs}) == 12 and "" not in {s.canary for s in specs}
    assert read_card(suite.card) == card


def test_contract_miss_fails_the_contract_and_blocks(suite: Suite) -> None:
    """A probe printing the wrong total makes the contract row fail_contract and the job exit 1."""
    wrong = but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({"total": "12.11"})))
    result, _ = run(suite, wrong)
    assert kinds(result) == {SAFETY: Kind.PASS, CONTRACT: Kind.FAIL_CONTRACT, STAT: Kind.PASS}
    assert result.card.status is JobStatus.BLOCKED
    assert result.card.exit_code == 1
    assert "total 12.11 != 12.10" in result.card.properties[1].detail


def test_write_outside_the_write_map_fails_safety(suite: Suite) -> None:
    """A write the write map does not cover makes the safety row fail_safety and the job exit 1."""
    unmapped = (FileChange(path="/work/x", change="created"),)
    result, _ = run(suite, but(SAFETY, lambda spec, _: Observation.of(spec, exit_code=0, writes=unmapped)))
    assert kinds(result) == {SAFETY: Kind.FAIL_SAFETY, CONTRACT: Kind.PASS, STAT: Kind.PASS}
    assert result.card.status is JobStatus.BLOCKED
    assert result.card.exit_code == 1
    assert "/work/x" in result.card.properties[0].detail


def test_six_hits_of_ten_is_an_inconclusive_sample(suite: Suite) -> None:
    """Six hits under the default 8-of-10 band is inconclusive_sample, which does not block the job."""

    def six_of_ten(spec: TrialSpec, fixture: bytes) -> Observation:
        tool = json.loads(fixture)["expected_tool"] if spec.trial_index < 6 else "search.web"
        return Observation.of(spec, exit_code=0, stdout=stdout({"tool": tool}))

    result, _ = run(suite, but(STAT, six_of_ten))
    row = result.card.properties[2]
    assert row.kind is Kind.INCONCLUSIVE_SAMPLE
    assert (row.trials, row.hits) == (10, 6)
    assert row.rule == {"rule": "fixed", "trials": 10, "min_hits": 8}
    assert result.card.status is JobStatus.INCONCLUSIVE
    assert result.card.exit_code == 0
    assert json.loads(suite.ledger.read_text())["sampler_window"] == [True]


def test_a_statistical_row_that_missed_keeps_the_check_s_first_assertion_message(suite: Suite) -> None:
    """A statistical property whose trials all missed says what the check asserted, after the count."""
    wrong = but(STAT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({"tool": "orders.cancel"})))
    result, _ = run(suite, wrong)
    row = result.card.properties[2]
    assert row.kind is Kind.INCONCLUSIVE_SAMPLE
    assert row.detail == "0/10 hits below band of 8; first misses: trial 0: chose orders.cancel"


def test_harness_fault_draws_a_ledger_credit(suite: Suite) -> None:
    """A harness fault on the contract property is a harness_error that opens a credit in a fresh
    ledger (budget 2), stops the row voting, and is saved in ledger.json beside the card."""
    faulty = but(
        CONTRACT, lambda spec, _: Observation.harness_fault(spec, "container vanished", origin=FaultOrigin.HARNESS)
    )
    result, _ = run(suite, faulty)
    card = result.card
    row = card.properties[1]
    assert row.kind is Kind.HARNESS_ERROR
    assert "container vanished" in row.detail
    assert row.ledger is LedgerAction.OPENED
    assert row.voting is False
    assert [(e.property_id, e.action, e.remaining) for e in card.ledger_actions] == [(CONTRACT, LedgerAction.OPENED, 1)]
    assert card.ledger_actions[0].expires_at == NOW + timedelta(hours=6)
    # A credited harness_error neither blocks nor explains itself in reasons; the other rows passed.
    assert card.status is JobStatus.ACCEPTED
    assert card.exit_code == 0
    assert card.reasons == ()
    books = json.loads(suite.ledger.read_text())
    assert set(books["credits"]) == {CONTRACT}
    assert books["credits"][CONTRACT]["remaining"] == 1
    assert datetime.fromisoformat(books["credits"][CONTRACT]["expires_at"]) == NOW + timedelta(hours=6)


def test_a_partial_run_decides_against_the_books_but_leaves_them_as_they_were(suite: Suite) -> None:
    """A `--property` run whose harness fault would open a credit shows the action on its card, but the
    ledger file is unchanged: a run accept refuses cannot spend credits or move the sampler window."""
    run(suite, good)  # the books exist from a whole run
    before = suite.ledger.read_bytes()
    faulty = but(
        CONTRACT, lambda spec, _: Observation.harness_fault(spec, "container vanished", origin=FaultOrigin.HARNESS)
    )

    def again(request: RunRequest) -> RunResult:
        executor = MockExecutor(faulty)
        return run_request(request, executor, lambda _: None)

    partial = again(replace(suite.request, new_ledger=False, properties=(CONTRACT,)))
    assert partial.card.selection == (CONTRACT,)
    assert [(e.property_id, e.action) for e in partial.card.ledger_actions] == [(CONTRACT, LedgerAction.OPENED)]
    assert suite.ledger.read_bytes() == before
    whole = again(replace(suite.request, new_ledger=False))  # the same fault in a whole run is written
    assert set(json.loads(suite.ledger.read_text())["credits"]) == {CONTRACT}
    assert whole.card.selection is None


def test_fixture_drift_fails_every_property_without_running_a_trial(suite: Suite) -> None:
    """A fixture edited after sealing makes every property harness_error and sends no trial to the executor."""
    (suite.fixtures / "invoices" / "inv-001.json").write_text(json.dumps({**INVOICE, "expected_total": "99.99"}))
    result, executor = run(suite, good)
    assert set(kinds(result).values()) == {Kind.HARNESS_ERROR}
    assert all("fixture drift" in row.detail for row in result.card.properties)
    assert all(row.trials == 0 for row in result.card.properties)
    assert not [call for call in executor.calls if call[0] == "run"]
    assert executor.calls == [("open", RUN_ID), ("close", RUN_ID)]
    # The safety row's harness_error can draw no credit, so the harness is broken (exit 2).
    assert result.card.status is JobStatus.HARNESS_BROKEN
    assert result.card.exit_code == 2


def test_an_executor_that_raises_a_harness_error_still_leaves_a_card(suite: Suite) -> None:
    """A HarnessError out of the executor (daemon gone mid-run) makes every property a harness_error
    on a written card, exit 2, with the failure as a harness event."""
    executor = MockExecutor(lambda spec, _: (_ for _ in ()).throw(SandboxError("daemon gone")))
    result = run_request(suite.request, executor)
    assert {row.kind for row in result.card.properties} == {Kind.HARNESS_ERROR}
    assert (result.card.status, result.card.exit_code) == (JobStatus.HARNESS_BROKEN, 2)
    assert [e.kind for e in result.card.harness_events] == ["executor_failed"]
    assert suite.card.exists() and executor.calls[-1] == ("close", RUN_ID)


@pytest.mark.parametrize("exc", [RuntimeError("handler blew up")])
def test_executor_is_aborted_when_the_handler_raises(
    suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: Exception
) -> None:
    """A bug's exception out of the executor's run propagates from run_gate (the CLI exits 70), after
    the executor was aborted (nothing left running, nothing waited for) and the snapshot removed, with no
    card, ledger or stdout line written."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def raising(spec: TrialSpec, fixture: bytes) -> Observation:
        raise exc

    executor = MockExecutor(raising)
    lines: list[str] = []
    with pytest.raises(type(exc), match=str(exc)):
        run_request(suite.request, executor, lines.append)
    assert executor.calls == [("open", RUN_ID), ("run", "12"), ("abort", RUN_ID)]
    assert not suite.card.exists()
    assert not suite.ledger.exists()
    assert lines == []
    assert list(scratch.iterdir()) == []


def test_emit_gets_one_line_per_property_and_a_job_line(suite: Suite) -> None:
    """`emit` receives verdict_lines: one JSON line per property in suite order, then the job's line."""
    lines: list[str] = []
    wrong = but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({"total": "0.00"})))
    result, _ = run(suite, wrong, lines.append)
    card = result.card
    verdict = prove(card, seal_digest=card.fixture.seal, tree_digest=card.tree_digest, suite_sha256=card.suite_sha256)
    assert lines == verdict_lines(card, suite.card, verdict)
    parsed = [json.loads(line) for line in lines]
    assert [p["property_id"] for p in parsed[:-1]] == [SAFETY, CONTRACT, STAT]
    assert [p["kind"] for p in parsed[:-1]] == [row.kind for row in result.card.properties]
    assert [p["kind"] for p in parsed[:-1]] == ["pass", "fail_contract", "pass"]
    miss = f"{CONTRACT}: fail_contract (trial 0: total 0.00 != 12.10)"
    assert parsed[-1] == {
        "job": "blocked",
        "exit_code": 1,
        "run_id": RUN_ID,
        "card": str(suite.card),
        "reasons": [miss],
        "accepted": False,
        "accept_reasons": [
            "the job ended blocked (exit 1)",
            miss,
            "oracle edits were not checked (run without --base); refused unless --allow-unchecked-oracle",
            "trials ran in no real sandbox image (image_id 'sha256:mock')",
        ],
    }


def test_a_check_that_raises_on_the_patch_output_blocks_the_patch(suite: Suite) -> None:
    """A contract check that raises KeyError (the patch's stdout lacks the field it indexes) is a
    fail_contract that blocks the job and draws no credit: judging fails closed."""
    result, _ = run(suite, but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({}))))
    row = result.card.properties[1]
    assert row.kind is Kind.FAIL_CONTRACT
    assert row.detail == "trial 0: check raised KeyError: 'total'"
    assert row.ledger is None and result.card.ledger_actions == ()
    assert (result.card.status, result.card.exit_code) == (JobStatus.BLOCKED, 1)


def test_a_fault_not_proven_outside_the_patch_draws_no_credit(suite: Suite) -> None:
    """A trial fault of unknown origin (the supervisor died without a report) is a harness_error that
    draws no credit and breaks the job with exit 2."""
    lost = but(CONTRACT, lambda spec, _: Observation.harness_fault(spec, "no report", origin=FaultOrigin.UNKNOWN))
    result, _ = run(suite, lost)
    assert result.card.properties[1].kind is Kind.HARNESS_ERROR
    assert result.card.ledger_actions == ()
    assert (result.card.status, result.card.exit_code) == (JobStatus.HARNESS_BROKEN, 2)


def test_a_tree_the_sandbox_cannot_lay_out_fails_the_patch(suite: Suite) -> None:
    """A fault the patched tree caused (too large for the work dir) is the patch's: fail_safety on a
    safety property, with no credit drawn."""
    too_big = but(
        SAFETY,
        lambda spec, _: Observation.harness_fault(spec, "No space left on device", origin=FaultOrigin.PATCH),
    )
    result, _ = run(suite, too_big)
    row = result.card.properties[0]
    assert row.kind is Kind.FAIL_SAFETY and "the patch broke the trial" in row.detail
    assert result.card.ledger_actions == ()
    assert result.card.exit_code == 1


def test_books_inside_the_patched_tree_are_refused_unless_they_are_outputs(suite: Suite) -> None:
    """A ledger file (or its lock) that would land in the patched tree, unlisted in [suite] outputs, is
    refused before the executor opens: writing it would change the tree accept recomputes."""
    from dataclasses import replace as replaced

    inside = replaced(suite.request, ledger=suite.request.workdir / "books" / "ledger.json")
    executor = MockExecutor(good)
    with pytest.raises(UsageError, match=r"lies inside the patched tree \(books/ledger.json\)"):
        run_request(inside, executor)
    assert executor.calls == []


def test_the_card_names_the_suite_as_the_user_named_it(suite: Suite) -> None:
    """The card's `suite` is the path given on the command line, not where the text was read from (with
    --base, a temporary checkout a reviewer could never open)."""
    result, _ = run(suite, good)
    assert result.card.suite == str(suite.request.suite)
