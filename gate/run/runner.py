"""`gate run`: seal check → plan → executor → fold → policy → card, once, with no retries.

Everything with a side effect (files, the executor, the clock, the run id) is gathered here and
passed into the pure core as values: what is refused before any container (gate.run.admission), the
trials (gate.run.trials), the commit of books and card (gate.run.commit). The run goes in stages, a
function each: prepare, bind, trials (then the base reruns), keep, commit.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import structlog

from gate.core.card.evidence import TrialRecord
from gate.core.card.stamp import RunFacts, verdict_lines
from gate.core.errors import UsageError
from gate.core.suite.trial import Side, TrialSpec
from gate.core.verdicts.bands import SprtRule
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import Verdict
from gate.io.artifacts import check_writable
from gate.io.checkproc import JudgeFactory, TrialJudge, judging
from gate.io.evidence import write_evidence
from gate.io.liveprogress import ProgressFile, progress_path
from gate.io.snapshot import LocalInputs
from gate.run.baserun import with_base_reruns
from gate.run.binding import Bound, Prepared, bind, prepare
from gate.run.commit import commit
from gate.run.executors.base import Executor, opened
from gate.run.executors.journaled import RunJournal, SpecOf, journal_header
from gate.run.forecast import forecast
from gate.run.oracle import Oracle, OracleRequest, read_oracle
from gate.run.pairedbase import base_inputs
from gate.run.progress import NO_PROGRESS, Both, Progress
from gate.run.request import BooksFactory, ExecutorFactory, ImageFactory, RunRequest, RunResult, card_of, file_books
from gate.run.runhistory import RunHistory, run_history
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
    hooks = _Hooks(executor_factory, judge_factory, now, emit, progress, note)
    with read_oracle(_oracle_request(request)) as oracle:
        run = prepare(
            _with_card(request, oracle),
            oracle,
            now=now,
            books_factory=books_factory or file_books,
            image_factory=image_factory,
        )
        # Read (and locked) before any container starts; a resume keeps the interrupted run's id.
        journal = RunJournal.start(card_of(run.request), request.state_dir, resume=request.resume, note=note)
        try:
            return _journaled(replace(run, run_id=journal.run_id or run_id or uuid.uuid4().hex), journal, hooks)
        finally:
            journal.close()  # a run that stopped early keeps its journal on disk, for a resume


@dataclass(frozen=True)
class _Hooks:
    """Where one run's side effects go, as `run_gate` was handed them."""

    executor_factory: ExecutorFactory
    judge_factory: JudgeFactory
    now: Callable[[], datetime]
    emit: Callable[[str], None]
    progress: Progress
    note: Callable[[str], None]


@dataclass(frozen=True)
class _Judged:
    """What the trials left: the facts, one verdict per property, and every judged trial's record."""

    facts: RunFacts
    verdicts: Sequence[Verdict]
    records: list[TrialRecord]


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


def _journaled(run: Prepared, journal: RunJournal, hooks: _Hooks) -> RunResult:
    """The run from its executor's open to its card: bind, trials, base reruns, keep, commit."""
    suite = run.suite
    # Opened before sealing and planning, so the sandbox's first containers start meanwhile; aborted
    # (nothing left running, no deadline waited out) if anything below raises, Ctrl-C included. The
    # check process loads the checks meanwhile too; it is killed and reaped when the run ends.
    log.debug("run.open", run_id=run.run_id)  # next: the sandbox sweeps what dead runs left, starts spares
    with (
        hooks.judge_factory(run.oracle.checks_module, suite.config) as checks,
        opened(hooks.executor_factory(run.admitted.image), run.run_id, suite.config.limits) as executor,
    ):
        bound = bind(run)
        seal, drift = bound.facts.binding.seal.digest[:16], bound.drift is not None
        log.info("run.start", run_id=run.run_id, suite=str(suite.path), seal=seal, drift=drift)
        # Beside the journal, what the checks judged so far: the journal holds observations only. The rules
        # come from the run's own suite (the base's with --base), so the view draws the sequential paths by them.
        rules = {p.id: p.rule() for p in suite.properties}
        sprt = {pid: rule for pid, rule in rules.items() if isinstance(rule, SprtRule)}
        paired = {pid: rule for pid, rule in rules.items() if isinstance(rule, PairedRule)}
        progress = Both(hooks.progress, ProgressFile(progress_path(journal.path), sprt=sprt, paired=paired))
        judged = _trials(run, bound, journal, executor, checks, progress)
        # A row that changed colour is rerun on the base tree, through the same executor, before it closes.
        facts = with_base_reruns(
            executor,
            judged.facts,
            judged.verdicts,
            judged.records,
            oracle=run.oracle,
            selection=run.admitted.selection,
            fixtures=bound.fixtures,
            checks=checks,
        )
    judged, recorded = _keep(run, replace(judged, facts=facts), bound.fixtures)
    return _commit(run, journal, hooks, judged, recorded)


def _trials(
    run: Prepared, bound: Bound, journal: RunJournal, executor: Executor, checks: TrialJudge, progress: Progress
) -> _Judged:
    """The stage that lays out the trees, binds the journal and runs the waves (every property a harness
    error instead when the seal drifted)."""
    request, oracle, suite, facts = run.request, run.oracle, run.suite, bound.facts
    with (
        LocalInputs(
            request.workdir,
            bound.fixtures,
            tree=run.admitted.tree,
            overrides=oracle.overrides,
            limits=suite.config.limits,
        ) as inputs,
        base_inputs(oracle, run.admitted.base, bound.fixtures, suite) as base_side,
    ):
        facts = replace(facts, binding=replace(facts.binding, tree_digest=inputs.tree_digest))
        trees = {Side.PATCH: inputs.tree_digest}
        if base_side is not None:
            inputs.serve(base_side)  # one wave holds both sides' trials of a paired property
            trees[Side.BASE] = base_side.tree_digest
        journal.expect(
            journal_header(
                run_id=run.run_id,
                suite=suite,
                checks=oracle.checks_module.source,
                tree=inputs.tree_digest,
                seal=facts.binding.seal.digest,
                properties=[p.id for p in suite.properties],
            )
        )
        records: list[TrialRecord] = []
        if bound.drift is not None:
            verdicts = all_harness(suite, facts.binding.seal.manifest, str(bound.drift))
        else:
            verdicts, facts = execute(
                journal.executor(executor, _spec_of(facts, trees)),
                facts,
                inputs,
                checks,
                bound.fixtures,
                progress,
                records,
                cross_check_share=request.cross_check,
                stored_canary=journal.stored_canary,
                base_tree_digest=trees.get(Side.BASE),
            )
        if (resumed := journal.event()) is not None:
            facts = replace(facts, trust=replace(facts.trust, events=(*facts.trust.events, resumed)))
    return _Judged(facts, verdicts, records)


def _keep(run: Prepared, judged: _Judged, fixtures: Mapping[str, bytes]) -> tuple[_Judged, RunHistory]:
    """The stage that keeps what the run observed: its flake history entries, and its trials as evidence."""
    # Frozen properties' results join the flake history only from a run on the base's own tree.
    recorded = run_history(
        judged.facts,
        judged.verdicts,
        oracle=run.oracle,
        selection=run.admitted.selection,
        fixtures=fixtures,
        partial=run.chosen is not None,
    )
    # Every judged trial kept by content before the card that binds their digest is written.
    evidence = write_evidence(run.admitted.store, judged.records)
    trust = replace(judged.facts.trust, evidence=evidence, flake_history=recorded.note)
    return replace(judged, facts=replace(judged.facts, trust=trust)), recorded


def _commit(run: Prepared, journal: RunJournal, hooks: _Hooks, judged: _Judged, recorded: RunHistory) -> RunResult:
    """The stage that decides, writes books and card as one step, and prints what `gate accept` will say."""
    facts, verdicts, card_path = judged.facts, judged.verdicts, card_of(run.request)
    # The commit (gate.run.commit): the books and the card that agrees with them are written whole, Ctrl-C
    # held (a run waiting for another's books still stops at once: nothing is written while it waits).
    if (summary := journal.summary()) is not None:
        hooks.note(summary)
    log.info("run.commit", run_id=facts.run_id, books=run.books.where)
    card = commit(
        facts,
        verdicts,
        judged.records,
        books=run.books,
        history=recorded.update if recorded.entries else None,
        partial=run.chosen is not None,
        journal=journal,
        card_path=card_path,
        signer=run.admitted.signer,
        reports=run.request.reports,
    )
    # What `gate accept` will say of this card on this tree: one answer, by accept's own path.
    verdict = forecast(card, card_path, run.oracle, tree_digest=facts.binding.tree_digest, now=hooks.now())
    for line in verdict_lines(card, card_path, verdict):
        hooks.emit(line)
    log.info("run.done", run_id=facts.run_id, status=card.status, exit_code=card.exit_code)
    return RunResult(card=card, verdicts=tuple(verdicts), freeze_file=run.oracle.freeze_file)


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
