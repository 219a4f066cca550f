"""A small three-band suite in a temporary folder and mock trial answers, for unit tests that run
the whole gate (`run_gate`) over a MockExecutor; no Docker."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gate.core.suite.trial import Captured, FileChange, Observation, TrialSpec
from gate.io.checkproc import JudgeFactory
from gate.io.fixtures import seal_tree, write_seal_file
from gate.run.executors.base import Executor
from gate.run.executors.mock import MockExecutor
from gate.run.request import RunRequest, RunResult
from gate.run.runner import run_gate

from .judging import in_process

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
RUN_ID = "run-test-0001"
SAFETY, CONTRACT, STAT = "no_unmapped_write", "invoice_total", "tool_choice_rate"

GATE_TOML = """\
[suite]
name = "tiny"
probe = "python3 probe.py"
fixtures = "fixtures"
checks = "checks.py"

[[property]]
id = "no_unmapped_write"
band = "safety"
fixture = "invoices/inv-001.json"
check = "builtin:no_unmapped_write"
deadline_s = 2.0
params = { write_map = ["out/*"] }

[[property]]
id = "invoice_total"
band = "contract"
fixture = "invoices/inv-001.json"
check = "checks:invoice_total"
deadline_s = 2.0

[[property]]
id = "tool_choice_rate"
band = "statistical"
fixture = "tools/refund-query.json"
check = "checks:tool_choice"
deadline_s = 2.0
"""

CHECKS_PY = '''\
from gate.core.checks import Trial


def invoice_total(trial: Trial) -> bool:
    """Contract: the printed total is the fixture's expected total."""
    got = trial.stdout_json()["total"]
    expect = trial.fixture_json()["expected_total"]
    assert got == expect, f"total {got} != {expect}"
    return True


def tool_choice(trial: Trial) -> bool:
    """Statistical: the probe picked the expected tool."""
    got = trial.stdout_json().get("tool")
    assert got == trial.fixture_json()["expected_tool"], f"chose {got}"
    return True
'''

INVOICE = {"invoice_id": "inv-001", "lines": [{"amount": "10.00"}], "tax_rate": "0.21", "expected_total": "12.10"}
QUERY = {"query": "where is my refund?", "expected_tool": "refunds.lookup"}

Handler = Callable[[TrialSpec, bytes], Observation]


@dataclass
class Suite:
    request: RunRequest
    fixtures: Path
    card: Path
    ledger: Path


def build_suite(tmp_path: Path) -> Suite:
    """A three-property suite (safety, contract, statistical 8 of 10), its sealed fixtures and a workdir."""
    (tmp_path / "gate.toml").write_text(GATE_TOML)
    (tmp_path / "checks.py").write_text(CHECKS_PY)
    fixtures = tmp_path / "fixtures"
    (fixtures / "invoices").mkdir(parents=True)
    (fixtures / "tools").mkdir()
    (fixtures / "clock.json").write_text(json.dumps({"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}))
    (fixtures / "invoices" / "inv-001.json").write_text(json.dumps(INVOICE))
    (fixtures / "tools" / "refund-query.json").write_text(json.dumps(QUERY))
    seal = tmp_path / "fixtures.seal"  # outside the tree it seals
    write_seal_file(seal, seal_tree(fixtures))
    work = tmp_path / "work"
    work.mkdir()
    (work / "probe.py").write_text("print('{}')\n")
    card = tmp_path / "out" / "card.json"
    # A first run: the books beside the card do not exist yet, so it asks for new ones.
    request = RunRequest(
        suite=tmp_path / "gate.toml",
        workdir=work,
        fixture=None,
        seal=seal,
        card=card,
        new_ledger=True,
        state_dir=Path(os.environ["PROBEGATE_STATE_DIR"]),  # tests/conftest.py's, outside any test's tree
    )
    return Suite(request=request, fixtures=fixtures, card=card, ledger=card.parent / "ledger.json")


def stdout(payload: dict) -> Captured:
    data = json.dumps(payload).encode()
    return Captured(data=data, length=len(data))


def good(spec: TrialSpec, fixture: bytes) -> Observation:
    """What a well-behaved probe reports: a mapped write, the right total, the right tool."""
    facts: dict = {"exit_code": 0, "image_id": "sha256:mock", "duration_s": 0.25}
    if spec.property_id == SAFETY:
        facts["writes"] = (FileChange(path="/work/out/result.json", change="created"),)
        facts["stdout"] = stdout({})
    elif spec.property_id == CONTRACT:
        facts["stdout"] = stdout({"total": json.loads(fixture)["expected_total"]})
    else:
        facts["stdout"] = stdout({"tool": json.loads(fixture)["expected_tool"]})
    return Observation.of(spec, **facts)


def but(property_id: str, bad: Handler) -> Handler:
    """`good`, except that `property_id`'s trials are answered by `bad`."""
    return lambda spec, fixture: (bad if spec.property_id == property_id else good)(spec, fixture)


def run_request(
    request: RunRequest,
    executor: Executor,
    emit: Callable[[str], None] = len,
    *,
    run_id: str = RUN_ID,
    judge_factory: JudgeFactory = in_process,
) -> RunResult:
    """`run_gate` on `request` with `executor` for every trial, the fixed clock and run id, and checks
    judged in this process unless `judge_factory` says otherwise (tests/unit/io/test_checkproc.py covers
    the check process)."""
    return run_gate(
        request,
        executor_factory=lambda _: executor,
        judge_factory=judge_factory,
        now=lambda: NOW,
        run_id=run_id,
        emit=emit,
    )


def run(
    suite: Suite,
    handler: Handler,
    emit: Callable[[str], None] | None = None,
    *,
    image_id: str = "sha256:mock",
    judge_factory: JudgeFactory = in_process,
) -> tuple[RunResult, MockExecutor]:
    """A whole run of `suite` whose trials `handler` answers, in the image `image_id` (a handler's
    observations must name it, or name none, to count); checks judged in this process unless
    `judge_factory` says otherwise (tests/unit/io/test_checkproc.py covers the check process)."""
    executor = MockExecutor(handler, image_id=image_id)
    result = run_request(suite.request, executor, emit or (lambda _: None), judge_factory=judge_factory)
    return result, executor
