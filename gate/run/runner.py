"""`gate run`: seal check → plan → executor → fold → policy → card, once, with no retries.

Everything with a side effect (files, the executor, the clock, the run id) is gathered here and
passed into the pure core as values: what is refused before any container (gate.run.admission), the
trials (gate.run.trials), the commit of books and card (gate.run.commit).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime

import structlog

from gate.core.card.calibration import deadline_source
from gate.core.card.evidence import TrialRecord
from gate.core.card.stamp import Binding, PerProperty, RunFacts, Trust, Venue, verdict_lines
from gate.core.errors import SealDriftError, UsageError
from gate.core.policy.freezes import resolve
from gate.core.suite.plan import check_fixtures
from gate.core.suite.selection import select_ids
from gate.core.suite.suite import PropertySpec, Suite
from gate.core.suite.trial import Side, TrialSpec
from gate.core.verdicts.paired import PairedRule
from gate.io.artifacts import check_writable
from gate.io.bookstore import BooksStore
from gate.io.checkproc import JudgeFactory, judging
from gate.io.evidence import write_evidence
from gate.io.fixtures import seal_tree, verify
from gate.io.inputs import read_input
from gate.io.snapshot import LocalInputs
from gate.run.admission import Admitted, admit
from gate.run.baserun import with_base_reruns
from gate.run.commit import commit
from gate.run.executor import opened
from gate.run.forecast import forecast
from gate.run.journaled import RunJournal, SpecOf, journal_header
from gate.run.oracle import Oracle, OracleRequest, read_oracle
from gate.run.pairedbase import base_inputs
from gate.run.progress import NO_PROGRESS, Progress
from gate.run.request import BooksFactory, ExecutorFactory, ImageFactory, RunRequest, RunResult, card_of, file_books
from gate.run.runhistory import run_history
from gate.run.trials import all_harness, execute, planner_for

log = structlog.get_logger("gate.run")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def run_gate(
    request: RunRequest,
    *,
    executor_factory: ExecutorFactory,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    run_id: str | None = None,
    emit: Callable[[str], None] = print,
    books_factory: BooksFactory | None = None,
    image_factory: ImageFactory | None = None,
    progress: Progress = NO_PROGRESS,
    judge_factory: JudgeFactory = judging,
    note: Callable[[str], None] = _to_stderr,
) -> RunResult:
    """Run the suite once against the patched tree and write the card; config errors raise first.
    `executor_factory` picks where trials run (the command line chooses; tests pass a mock), and
    `judge_factory` where checks run (the bounded check process; unit tests may judge in process);
    `books_factory` where the ledger and window live (default: the ledger file, `file_books`);
    `progress` hears trials planned and judged (the command line draws it on a terminal);
    `note` hears what a resume reused (stderr)."""
    with read_oracle(_oracle_request(request)) as oracle:
        return _run(
            _with_card(request, oracle),
            oracle,
            executor_factory=executor_factory,
            now=now,
            run_id=run_id,
            emit=emit,
            books_factory=books_factory or file_books,
            image_factory=image_factory,
            progress=progress,
            judge_factory=judge_factory,
            note=note,
        )


def _oracle_request(request: RunRequest) -> OracleRequest:
    return OracleRequest(
        suite=request.suite,
        workdir=request.workdir,
        seal=request.seal,
        fixture=request.fixture,
        calibration=request.calibration,
        base=request.base,
        calibrated_deadlines=request.calibrated_deadlines,
        interpreter=request.interpreter,
    )


def _with_card(request: RunRequest, oracle: Oracle) -> RunRequest:
    """The request with the card path: --card, else the suite's (checked like --card, before any trial)."""
    if request.card is not None:
        return request
    if oracle.card is None:
        raise UsageError("no card path: pass --card or set [suite] card", file=str(request.suite), field="--card")
    check_writable(oracle.card, "[suite] card")
    return replace(request, card=oracle.card)


def _run(
    request: RunRequest,
    oracle: Oracle,
    *,
    executor_factory: ExecutorFactory,
    now: Callable[[], datetime],
    run_id: str | None,
    emit: Callable[[str], None],
    books_factory: BooksFactory,
    image_factory: ImageFactory | None,
    progress: Progress,
    judge_factory: JudgeFactory,
    note: Callable[[str], None],
) -> RunResult:
    whole = oracle.suite
    # Only the selected properties are planned, run and carded; freezes and `prove` still see the whole suite.
    chosen = select_ids([p.id for p in whole.properties], exact=request.properties, keyword=request.keyword)
    suite = whole if chosen is None else whole.model_copy(update={"properties": _only(whole, chosen)})
    started = now()
    # Only checked here (missing, unreachable, corrupt: refused before any container); read at decision time.
    books = books_factory(request, suite)
    books.check()
    admitted = admit(request, oracle, suite, books, image_factory)
    # Read (and locked) before any container starts; a resume keeps the interrupted run's id.
    journal = RunJournal.start(card_of(request), request.state_dir, resume=request.resume, note=note)
    try:
        return _journaled(
            request,
            oracle,
            journal,
            suite=suite,
            chosen=chosen,
            started=started,
            books=books,
            admitted=admitted,
            executor_factory=executor_factory,
            now=now,
            run_id=journal.run_id or run_id or uuid.uuid4().hex,
            emit=emit,
            progress=progress,
            judge_factory=judge_factory,
            note=note,
        )
    finally:
        journal.close()  # a run that stopped early keeps its journal on disk, for a resume


def _journaled(
    request: RunRequest,
    oracle: Oracle,
    journal: RunJournal,
    *,
    suite: Suite,
    chosen: tuple[str, ...] | None,
    started: datetime,
    books: BooksStore,
    admitted: Admitted,
    executor_factory: ExecutorFactory,
    now: Callable[[], datetime],
    run_id: str,
    emit: Callable[[str], None],
    progress: Progress,
    judge_factory: JudgeFactory,
    note: Callable[[str], None],
) -> RunResult:
    selection, image = admitted.selection, admitted.image
    whole, fixture_root, expected = oracle.suite, oracle.fixture_root, oracle.expected
    clock, freeze_file, calibration, oracle_edits = oracle.clock, oracle.freeze_file, oracle.calibration, oracle.edits
    card_path = card_of(request)
    # Opened before sealing and planning, so the sandbox's first containers start meanwhile; aborted
    # (nothing left running, no deadline waited out) if anything below raises, Ctrl-C included. The
    # check process loads the checks meanwhile too; it is killed and reaped when the run ends.
    log.debug("run.open", run_id=run_id)  # next: the sandbox sweeps what dead runs left, starts spares
    with (
        judge_factory(oracle.checks_module, suite.config) as checks,
        opened(executor_factory(image), run_id, suite.config.limits) as executor,
    ):
        drift: SealDriftError | None = None
        try:
            current = verify(fixture_root, expected, seal_file=str(oracle.seal_file))
        except SealDriftError as exc:
            drift, current = exc, seal_tree(fixture_root)
        if drift is None:
            check_fixtures(suite.properties, current.manifest, suite_file=str(suite.path))
        facts = RunFacts(
            run_id=run_id,
            started=started,
            retries=request.retries,
            binding=Binding(
                suite=suite,
                workdir=request.workdir,
                fixture_root=fixture_root,
                seal=current,
                clock=clock,
                base=oracle.base_commit,
                oracle_edits=oracle_edits,
                suite_file=str(request.suite),
                selection=chosen,
            ),
            trust=Trust(
                freezes=resolve(
                    freeze_file, bands=whole.bands(), seal=current.digest, now=started, source=str(whole.freeze_path)
                ),
            ),
            venue=Venue(unenrolled_workers=request.unenrolled_workers, seeds_from=request.seeds_from),
            per_property=PerProperty(
                deadline_sources={
                    p.id: deadline_source(p.id, p.deadline_s, calibration, current.digest) for p in suite.properties
                },
            ),
        )
        fixtures = {
            current.manifest[p.fixture]: read_input(fixture_root / p.fixture, "fixture")
            for p in suite.properties
            if p.fixture in current.manifest
        }
        log.info("run.start", run_id=facts.run_id, suite=str(suite.path), seal=current.digest[:16], drift=bool(drift))

        with (
            LocalInputs(
                request.workdir, fixtures, tree=admitted.tree, overrides=oracle.overrides, limits=suite.config.limits
            ) as inputs,
            base_inputs(oracle, admitted.base, fixtures, suite) as base_side,
        ):
            facts = replace(facts, binding=replace(facts.binding, tree_digest=inputs.tree_digest))
            trees = {Side.PATCH: inputs.tree_digest}
            if base_side is not None:
                inputs.serve(base_side)  # one wave holds both sides' trials of a paired property
                trees[Side.BASE] = base_side.tree_digest
            journal.expect(
                journal_header(
                    run_id=run_id,
                    suite=suite,
                    checks=oracle.checks_module.source,
                    tree=inputs.tree_digest,
                    seal=current.digest,
                    properties=[p.id for p in suite.properties],
                )
            )
            records: list[TrialRecord] = []
            if drift is not None:
                verdicts = all_harness(suite, current.manifest, str(drift))
            else:
                verdicts, facts = execute(
                    journal.executor(executor, _spec_of(facts, trees)),
                    facts,
                    inputs,
                    checks,
                    fixtures,
                    progress,
                    records,
                    cross_check_share=request.cross_check,
                    stored_canary=journal.stored_canary,
                    base_tree_digest=trees.get(Side.BASE),
                )
            if (resumed := journal.event()) is not None:
                facts = replace(facts, trust=replace(facts.trust, events=(*facts.trust.events, resumed)))
        # A row that changed colour is rerun on the base tree, through the same executor, before it closes.
        facts = with_base_reruns(
            executor, facts, verdicts, records, oracle=oracle, selection=selection, fixtures=fixtures, checks=checks
        )
    # Frozen properties' results join the flake history only from a run on the base's own tree.
    recorded = run_history(
        facts, verdicts, oracle=oracle, selection=selection, fixtures=fixtures, partial=chosen is not None
    )
    # Every judged trial kept by content before the card that binds their digest is written.
    evidence = write_evidence(admitted.store, records)
    facts = replace(facts, trust=replace(facts.trust, evidence=evidence, flake_history=recorded.note))

    # The commit (gate.run.commit): the books and the card that agrees with them are written whole, Ctrl-C
    # held (a run waiting for another's books still stops at once: nothing is written while it waits).
    if (summary := journal.summary()) is not None:
        note(summary)
    log.info("run.commit", run_id=facts.run_id, books=books.where)
    card = commit(
        facts,
        verdicts,
        records,
        books=books,
        history=recorded.update if recorded.entries else None,
        partial=chosen is not None,
        journal=journal,
        card_path=card_path,
        signer=admitted.signer,
        reports=request.reports,
    )
    # What `gate accept` will say of this card on this tree: one answer, by accept's own path.
    verdict = forecast(card, card_path, oracle, tree_digest=facts.binding.tree_digest, now=now())
    for line in verdict_lines(card, card_path, verdict):
        emit(line)
    log.info("run.done", run_id=facts.run_id, status=card.status, exit_code=card.exit_code)
    return RunResult(card=card, verdicts=tuple(verdicts), freeze_file=freeze_file)


def _spec_of(facts: RunFacts, trees: Mapping[Side, str]) -> SpecOf:
    """The spec this run plans for a stored trial (with its stored canary), for the image the run resolved;
    a base-side trial only for a paired property of a run with a base tree."""
    props = {p.id: p for p in facts.binding.suite.properties}

    def spec_of(image_id: str, property_id: str, index: int, canary: str, side: Side) -> TrialSpec | None:
        prop = props.get(property_id)
        if prop is None or not 0 <= index < prop.planned_trials() or side not in trees:
            return None
        if side is Side.BASE and not isinstance(prop.rule(), PairedRule):
            return None
        on_image = replace(facts, venue=replace(facts.venue, image_id=image_id))
        planner = replace(planner_for(on_image, trees[side]), side=side)
        [spec] = planner.trials(prop, index, 1)
        return spec.model_copy(update={"canary": canary})

    return spec_of


def _only(suite: Suite, chosen: tuple[str, ...]) -> tuple[PropertySpec, ...]:
    return tuple(p for p in suite.properties if p.id in chosen)
