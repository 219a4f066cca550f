"""`gate baseline`: run the suite on the unpatched tree before any patch is judged. A safety or
contract property that fails there is wrong; a harness error there is a broken harness. The
measured trial durations become a calibration file: per property p50, p95 and a proposed deadline
(p95 × factor), which `gate run` then reports as calibrated instead of a proposal.

`--twice` (the nightly pair, `gate.run.nightly`) runs it twice in a row and keeps both runs in the
books' flake history; the first run's card goes to `<card>.first.json`, the calibration pools both.

Exit codes: 0 the suite holds on the base tree; 1 a property fails there (fix the property), or with
`--twice` a safety or contract property changed colour between the two runs (a flake: see the repair
task); 2 the harness is broken there; 64+ as for `gate run`. A lift proposal alone leaves it 0.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from gate.core.card.calibration import Calibration, baseline_findings, calibration_to_json, summarise
from gate.core.card.card import VerdictCard
from gate.core.errors import RET_BLOCKED, RET_HARNESS, RET_OK, GateError
from gate.core.escaping import one_line
from gate.core.policy.explain import Explanation, Finding
from gate.core.policy.history import LIFT_TARGET
from gate.core.suite.suite import Suite
from gate.core.verdicts.verdict import Kind
from gate.io.artifacts import write_atomic
from gate.io.bookstore import BooksStore, MemoryBooks
from gate.io.checkproc import JudgeFactory, judging
from gate.io.evidence import stored_records
from gate.io.reports import ReportTargets, write_reports
from gate.io.suite import load_suite
from gate.run.explain import ExplainRequest, explain_flakes
from gate.run.nightly import Explain, NightlyOutcome, settle_pair
from gate.run.progress import NO_PROGRESS, Progress
from gate.run.request import BooksFactory, ExecutorFactory, ImageFactory, RunRequest, RunResult, file_books
from gate.run.runner import run_gate


def run_baseline(
    request: RunRequest,
    calibration_path: Path,
    *,
    factor: float = 1.5,
    out: TextIO | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    executor_factory: ExecutorFactory,
    image_factory: ImageFactory | None = None,
    progress: Progress = NO_PROGRESS,
    twice: bool = False,
    books_factory: BooksFactory | None = None,
    run_ids: tuple[str, str] | None = None,
    lift_target: float = LIFT_TARGET,
    judge_factory: JudgeFactory = judging,
) -> int:
    """Run the suite on the base tree, write the calibration, print findings; returns the exit code.
    `progress` hears trials planned and judged, as in `gate run`. `twice`: the nightly pair, its
    history kept in `books_factory`'s store (default: the ledger file), `run_ids` naming its runs."""
    out = out or sys.stdout  # as it is now, not at import (a test may have replaced it since)
    suite = load_suite(request.suite)
    store = _pair_books(request, suite, books_factory) if twice else None

    def one(card: Path | None, run_id: str | None, reports: ReportTargets) -> RunResult:
        # A baseline must not spend the real ledger's credits or move the real sampler window: its
        # books are fresh and live only in memory, whatever --ledger says (the pair adds only history).
        return run_gate(
            replace(request, calibrated_deadlines=False, card=card, reports=reports),
            emit=lambda _: None,
            executor_factory=executor_factory,
            image_factory=image_factory,
            progress=progress,
            now=now,
            run_id=run_id,
            books_factory=lambda _, suite: MemoryBooks(suite.config.ledger, suite.config.sampler),
            judge_factory=judge_factory,
        )

    results = _runs(request, one, twice=twice, run_ids=run_ids)
    result = results[-1]
    card = result.card
    calibration = _calibrate(results, factor, calibration_path, now)
    findings, harness = _findings(results, suite)
    _print_rows(card, calibration, out)
    print(json.dumps({"calibration": str(calibration_path), "seal": card.fixture.seal, "findings": findings}), file=out)
    nightly = None
    if store is not None and request.card is not None:
        nightly = settle_pair(
            store,
            results[0].card,
            card,
            suite.bands(),
            card_path=request.card,
            target=lift_target,
            freeze_file=result.freeze_file,
            explain=_explainer(request, executor_factory, image_factory, judge_factory),
        )
        print(json.dumps(_nightly_line(results[0].card.run_id, card.run_id, nightly)), file=out)
        html = request.reports.report_html is not None
        write_reports(nightly.card, request.reports, stored_records(nightly.card, request.card) if html else [])
    if harness:
        return RET_HARNESS
    return RET_BLOCKED if findings or (nightly and nightly.flakes) else RET_OK


def _pair_books(request: RunRequest, suite: Suite, books_factory: BooksFactory | None) -> BooksStore:
    """The books the nightly pair keeps its history in, checked before any trial: a missing, clobbered or
    corrupt store refuses the pair."""
    if request.card is None:
        raise AssertionError("the command line gives a baseline its card")
    store = (books_factory or file_books)(request, suite)
    store.check()
    return store


def _runs(
    request: RunRequest,
    one: Callable[[Path | None, str | None, ReportTargets], RunResult],
    *,
    twice: bool,
    run_ids: tuple[str, str] | None,
) -> list[RunResult]:
    """The baseline's run, or the nightly pair's two (the first card written beside the second, as
    `<card>.first.json`)."""
    ids = run_ids or (None, None)
    results = []
    if twice and request.card is not None:
        first_card = request.card.with_name(request.card.stem + ".first" + request.card.suffix)
        results.append(one(first_card, ids[0], ReportTargets()))
    # The pair's reports are written once its card is final (flake files and lift proposals on it).
    results.append(one(request.card, ids[1], ReportTargets() if twice else request.reports))
    return results


def _calibrate(results: Sequence[RunResult], factor: float, path: Path, now: Callable[[], datetime]) -> Calibration:
    """The calibration over every run's trial durations, pooled per property, written to `path`."""
    durations: dict[str, list[float]] = {}
    for each in results:
        for row in each.card.properties:
            durations.setdefault(row.id, []).extend(row.durations_s)
    calibration = summarise(durations, factor, results[-1].card.fixture.seal, now())
    write_atomic(path, calibration_to_json(calibration).encode("utf-8"))
    return calibration


def _findings(results: Sequence[RunResult], suite: Suite) -> tuple[list[str], bool]:
    """What the runs found wrong with the suite on the base tree, each once, and whether any property was
    a harness error there."""
    findings: list[str] = []
    harness = False
    for each in results:
        kinds = {v.property_id: v.kind for v in each.verdicts}
        raised = {v.property_id for v in each.verdicts if v.check_raised}
        findings += [f for f in baseline_findings(kinds, suite.bands(), raised=raised) if f not in findings]
        harness = harness or any(kind is Kind.HARNESS_ERROR for kind in kinds.values())
    return findings, harness


def _print_rows(card: VerdictCard, calibration: Calibration, out: TextIO) -> None:
    """One JSON line per property: its kind, trials and timings, and the deadline the calibration proposes."""
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


def _nightly_line(first: str, second: str, nightly: NightlyOutcome) -> dict[str, object]:
    return {
        "nightly": {
            "runs": [first, second],
            "flakes": [flake.line() for flake in nightly.flakes],
            "freezes_proposed": list(nightly.freeze_ids),
            "broken_safety": list(nightly.broken_safety),
            "lift": [lift.line() for lift in nightly.lifts],
            # The measured cause of each flake: a source, "residual", or why none was named.
            "causes": {e.property_id: e.source or str(e.finding) for e in nightly.causes},
            # Across the suite: each measured cause with the properties it moves (freezes and this pair).
            "suite_causes": {cause: list(ids) for cause, ids in nightly.suite_causes.items()},
        }
    }


def _explainer(
    request: RunRequest,
    executor_factory: ExecutorFactory,
    image_factory: ImageFactory | None,
    judge_factory: JudgeFactory,
) -> Explain:
    """Explains the pair's flakes on the tree the pair ran on, with its oracle and executor: with --base
    as given, else the work tree (the base commit's checkout the nightly job runs on)."""

    def explain(ids: Sequence[str]) -> list[Explanation]:
        asked = ExplainRequest(
            suite=request.suite,
            workdir=request.workdir,
            properties=tuple(ids),
            fixture=request.fixture,
            seal=request.seal,
            base=request.base,
            allow_unchecked_oracle=request.base is None,
            image=request.image,
            interpreter=request.interpreter,
        )
        try:
            return explain_flakes(
                asked, executor_factory=executor_factory, image_factory=image_factory, judge_factory=judge_factory
            )
        except GateError as exc:  # the pair's files are still written, each flake's cause left unexplained
            words = f"explain failed: {one_line(str(exc))[:300]}"
            return [Explanation(property_id=pid, finding=Finding.UNEXPLAINED, words=words) for pid in ids]

    return explain
