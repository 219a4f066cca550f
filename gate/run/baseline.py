"""`gate baseline`: run the suite on the unpatched tree before any patch is judged. A safety or
contract property that fails there is wrong; a harness error there is a broken harness. The
measured trial durations become a calibration file: per property p50, p95 and a proposed deadline
(p95 × factor), which `gate run` then reports as calibrated instead of a proposal.

Exit codes: 0 the suite holds on the base tree; 1 a property fails there (fix the property);
2 the harness is broken there; 64+ as for `gate run`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from gate.core.calibration import baseline_findings, calibration_to_json, summarise
from gate.core.errors import RET_BLOCKED, RET_HARNESS, RET_OK
from gate.core.verdict import Kind
from gate.io.artifacts import write_atomic
from gate.io.state import MemoryBooks
from gate.io.suite import load_suite
from gate.run.progress import NO_PROGRESS, Progress
from gate.run.runner import ExecutorFactory, ImageFactory, RunRequest, run_gate


def run_baseline(
    request: RunRequest,
    calibration_path: Path,
    *,
    factor: float = 1.5,
    out: TextIO = sys.stdout,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    executor_factory: ExecutorFactory,
    image_factory: ImageFactory | None = None,
    progress: Progress = NO_PROGRESS,
) -> int:
    """Run the suite on the base tree, write the calibration, print findings; returns the exit code.
    `progress` hears trials planned and judged, as in `gate run`."""
    suite = load_suite(request.suite)
    # A baseline must not spend the real ledger's credits or move the real sampler window: its
    # books are fresh and live only in memory, whatever --ledger says.
    result = run_gate(
        replace(request, calibrated_deadlines=False),
        emit=lambda _: None,
        executor_factory=executor_factory,
        image_factory=image_factory,
        progress=progress,
        now=now,
        books_factory=lambda _, suite: MemoryBooks(suite.config.ledger, suite.config.sampler),
    )
    card = result.card
    durations = {row.id: list(row.durations_s) for row in card.properties}
    calibration = summarise(durations, factor, card.fixture.seal, now())
    write_atomic(calibration_path, calibration_to_json(calibration).encode("utf-8"))
    kinds = {v.property_id: v.kind for v in result.verdicts}
    raised = {v.property_id for v in result.verdicts if v.check_raised}
    findings = baseline_findings(kinds, suite.bands(), raised=raised)
    for row in card.properties:
        timing = calibration.properties.get(row.id)
        print(
            json.dumps(
                {
                    "property_id": row.id,
                    "kind": row.kind,
                    "trials": row.trials,
                    "p50_s": timing.p50_s if timing else None,
                    "p95_s": timing.p95_s if timing else None,
                    "proposed_deadline_s": timing.deadline_s if timing else None,
                    "deadline_s": row.deadline_s,
                }
            ),
            file=out,
        )
    print(json.dumps({"calibration": str(calibration_path), "seal": card.fixture.seal, "findings": findings}), file=out)
    if any(kind is Kind.HARNESS_ERROR for kind in kinds.values()):
        return RET_HARNESS
    return RET_BLOCKED if findings else RET_OK
