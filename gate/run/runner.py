"""`gate run`: seal check → plan → executor → fold → policy → card, once, with no retries.

Everything with a side effect (files, the executor, the clock, the run id) is gathered here and
passed into the pure core as values. `python -m gate.run` is the same command as `gate run`.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import structlog

from gate.core.card.calibration import deadline_source
from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord
from gate.core.card.stamp import RunFacts, stamp, verdict_lines
from gate.core.errors import SealDriftError, UsageError
from gate.core.policy.freezes import FreezeFile, resolve
from gate.core.policy.ledger import Ledger
from gate.core.policy.policy import Decision, decide
from gate.core.suite.plan import check_fixtures
from gate.core.suite.selection import select_ids
from gate.core.suite.suite import ImageSource, PropertySpec, Suite
from gate.core.suite.trial import Side, TrialSpec
from gate.core.verdicts.bands import SamplerWindow
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import Verdict
from gate.io.artifacts import card_bytes, check_writable, write_card
from gate.io.cardsig import drop_stale_signature, run_signing_key, write_signature
from gate.io.checkproc import JudgeFactory, judging
from gate.io.evidence import check_store, evidence_dir, write_evidence
from gate.io.fixtures import seal_tree, verify
from gate.io.inputs import read_input
from gate.io.interrupts import held
from gate.io.journal import check_journal_place, journal_path
from gate.io.keys import SigningKey
from gate.io.ledgerfile import FileBooks
from gate.io.patchedtree import PatchedTree, check_fits, read_patched_tree
from gate.io.proposals import check_proposal_paths, write_proposals
from gate.io.reports import ReportTargets, write_reports
from gate.io.snapshot import LocalInputs, check_outside_tree
from gate.io.state import BooksStore
from gate.io.treeselect import TreeSelection, tree_selection
from gate.run.durable import RunJournal, SpecOf, journal_header
from gate.run.executor import Executor, opened
from gate.run.flicker import with_base_reruns
from gate.run.forecast import forecast
from gate.run.oracle import Oracle, OracleRequest, read_oracle
from gate.run.pairedbase import base_inputs, paired_base
from gate.run.progress import NO_PROGRESS, Progress
from gate.run.runhistory import run_history
from gate.run.trials import all_harness, execute, planner_for

log = structlog.get_logger("gate.run")


@dataclass(frozen=True)
class RunRequest:
    suite: Path
    workdir: Path
    fixture: Path | None
    seal: Path | None  # None: the suite's `[suite] seal`
    card: Path | None  # None: the suite's `[suite] card` (filled in once the oracle is read)
    retries: int = 0
    base: str | None = None
    ledger: Path | None = None
    new_ledger: bool = False  # --new-ledger: the books may (and must) not exist yet
    image: str | None = None  # --image: the sandbox image tag (refused when the suite names its own)
    cross_check: float | None = None  # --cross-check: the share of trials run again elsewhere (None: the suite's)
    calibration: Path | None = None
    calibrated_deadlines: bool = True  # False for `gate baseline`, which measures instead
    reports: ReportTargets = field(default_factory=ReportTargets)  # JUnit XML / Markdown, written right after the card
    properties: tuple[str, ...] = ()  # --property: run only these ids (with `keyword`: either picks)
    keyword: str | None = None  # -k: run only ids holding this substring or matching this glob
    sign_key: Path | None = None  # --sign-key: sign the card (its envelope beside it, gate.io.cardsig)
    unenrolled_workers: bool = False  # trials go over a broker with no worker registry (the card records it)
    seeds_from: str | None = None  # --replay-seeds: the run whose trial seeds to give (None: this run's own)
    resume: bool = False  # --resume: continue the interrupted run from its journal (gate.io.journal)


@dataclass(frozen=True)
class RunResult:
    card: VerdictCard
    verdicts: tuple[Verdict, ...]
    freeze_file: FreezeFile | None = None  # as the oracle read it (the nightly pair reads creation times)


# Where trials run (the command line picks, with its own settings: broker, jobs, workers…), given the image
# to run them in: the suite's project image, else --image, else None (the sandbox's own).
ExecutorFactory = Callable[[str | None], Executor]
# Finds or builds the suite's project image and returns its ID (the command line picks Docker).
ImageFactory = Callable[[ImageSource], str]
# Where the books live, under the suite's terms (the command line picks a file or Redis).
BooksFactory = Callable[[RunRequest, Suite], BooksStore]


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
    )


def _with_card(request: RunRequest, oracle: Oracle) -> RunRequest:
    """The request with the card path: --card, else the suite's (checked like --card, before any trial)."""
    if request.card is not None:
        return request
    if oracle.card is None:
        raise UsageError("no card path: pass --card or set [suite] card", file=str(request.suite), field="--card")
    check_writable(oracle.card, "[suite] card")
    return replace(request, card=oracle.card)


def _card(request: RunRequest) -> Path:
    # Filled in by `_with_card` before `_run`; a request without one never gets this far.
    assert request.card is not None, "run_gate resolves the card before the run"
    return request.card


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
    card_path = _card(request)
    selection = tree_selection(suite, request.workdir, suite_file=request.suite)
    check_outside_tree(card_path, request.workdir, selection, field="--card")
    # The evidence store beside the card is an output too: inside the tree it must be left out like the card.
    store = evidence_dir(card_path)
    check_outside_tree(store, request.workdir, selection, field="--card")
    check_store(store, "--card")
    check_proposal_paths(card_path, request.workdir, selection)
    for flag, path in request.reports.outputs().items():
        check_outside_tree(path, request.workdir, selection, field=flag)
    # The journal is read back by a resume: anywhere in the patch's repository, the patch could have written it.
    check_journal_place(journal_path(card_path), request.workdir)
    # Read and sized before any container starts: a tree the sandbox cannot hold is refused in one line
    # (a configuration error: nothing runs, no card, no credit), not found out in every container.
    tree = read_patched_tree(request.workdir, selection)
    check_fits(tree, suite.config.limits, where=request.workdir)
    base = paired_base(suite, oracle, selection, shown=request.suite)
    signer = None
    if request.sign_key is not None:  # read now: a key the sandbox could reach is refused before any trial
        signer = run_signing_key(request.sign_key, request.workdir, tree, selection, card=card_path)
    image = _run_image(request, oracle.image, image_factory)
    # Read (and locked) before any container starts; a resume keeps the interrupted run's id.
    journal = RunJournal.start(card_path, resume=request.resume, note=note)
    try:
        return _journaled(
            request,
            oracle,
            journal,
            suite=suite,
            chosen=chosen,
            started=started,
            books=books,
            selection=selection,
            tree=tree,
            base=base,
            signer=signer,
            store=store,
            executor_factory=executor_factory,
            now=now,
            run_id=journal.run_id or run_id or uuid.uuid4().hex,
            emit=emit,
            image=image,
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
    selection: TreeSelection,
    tree: PatchedTree,
    base: PatchedTree | None,
    signer: SigningKey | None,
    store: Path,
    executor_factory: ExecutorFactory,
    now: Callable[[], datetime],
    run_id: str,
    emit: Callable[[str], None],
    image: str | None,
    progress: Progress,
    judge_factory: JudgeFactory,
    note: Callable[[str], None],
) -> RunResult:
    whole, fixture_root, expected = oracle.suite, oracle.fixture_root, oracle.expected
    clock, freeze_file, calibration, oracle_edits = oracle.clock, oracle.freeze_file, oracle.calibration, oracle.edits
    card_path = _card(request)
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
            suite=suite,
            workdir=request.workdir,
            fixture_root=fixture_root,
            seal=current,
            clock=clock,
            retries=request.retries,
            base=oracle.base_commit,
            oracle_edits=oracle_edits,
            freezes=resolve(
                freeze_file, bands=whole.bands(), seal=current.digest, now=started, source=str(whole.freeze_path)
            ),
            deadline_sources={
                p.id: deadline_source(p.id, p.deadline_s, calibration, current.digest) for p in suite.properties
            },
            selection=chosen,
            suite_file=str(request.suite),
            unenrolled_workers=request.unenrolled_workers,
            seeds_from=request.seeds_from,
        )
        fixtures = {
            current.manifest[p.fixture]: read_input(fixture_root / p.fixture, "fixture")
            for p in suite.properties
            if p.fixture in current.manifest
        }
        log.info("run.start", run_id=facts.run_id, suite=str(suite.path), seal=current.digest[:16], drift=bool(drift))

        with (
            LocalInputs(
                request.workdir, fixtures, tree=tree, overrides=oracle.overrides, limits=suite.config.limits
            ) as inputs,
            base_inputs(oracle, base, fixtures, suite) as base_side,
        ):
            facts = replace(facts, tree_digest=inputs.tree_digest)
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
                facts = replace(facts, events=(*facts.events, resumed))
        # A row that changed colour is rerun on the base tree, through the same executor, before it closes.
        facts = with_base_reruns(
            executor, facts, verdicts, records, oracle=oracle, selection=selection, fixtures=fixtures, checks=checks
        )
    # Frozen properties' results join the flake history only from a run on the base's own tree.
    recorded = run_history(
        facts, verdicts, oracle=oracle, selection=selection, fixtures=fixtures, partial=chosen is not None
    )
    # Every judged trial kept by content before the card that binds their digest is written.
    facts = replace(facts, evidence=write_evidence(store, records), flake_history=recorded.note)

    def settle(ledger: Ledger, window: SamplerWindow) -> tuple[Decision, Ledger, SamplerWindow]:
        decision = decide(
            verdicts,
            frozen=facts.freezes.frozen,
            ledger=ledger,
            window=window,
            now=started,
            max_fault_share=suite.config.ledger.max_fault_share,
            oracle_edits=facts.oracle_edits,
        )
        if chosen is not None:
            # A partial run (-k/--property) cannot be accepted, so it must not spend the credits or
            # fill the sampler window a whole run will be judged by: decided against the books, not written.
            return decision, ledger, window
        return decision, decision.ledger.pruned(started), decision.window

    # The commit: the books and the card that agrees with them are written whole. Ctrl-C is held from
    # here (a run waiting for another's books still stops at once: nothing is written while it waits).
    if (summary := journal.summary()) is not None:
        note(summary)
    log.info("run.commit", run_id=facts.run_id, books=books.where)
    with held():
        journal.commit()  # from here on a resume of this run is refused: its books may be written
        # Read, decide and write as one atomic step: a concurrent run's entries are in what `settle` reads.
        decision = books.update(settle, history=recorded.update if recorded.entries else None)
        card = stamp(facts, verdicts, decision)
        write_proposals(card_path, card)  # before the card, so the card never names a file not yet there
        if signer is None:
            drop_stale_signature(card_path)  # an earlier run's envelope would only confuse a reader
        write_card(card_path, card)
        if signer is not None:
            write_signature(card_path, card, card_bytes(card), signer)
        write_reports(card, request.reports, records)
        journal.done()
    # What `gate accept` will say of this card on this tree: one answer, by accept's own path.
    verdict = forecast(card, card_path, oracle, tree_digest=facts.tree_digest, now=now())
    for line in verdict_lines(card, card_path, verdict):
        emit(line)
    log.info("run.done", run_id=facts.run_id, status=card.status, exit_code=card.exit_code)
    return RunResult(card=card, verdicts=tuple(verdicts), freeze_file=freeze_file)


def _spec_of(facts: RunFacts, trees: Mapping[Side, str]) -> SpecOf:
    """The spec this run plans for a stored trial (with its stored canary), for the image the run resolved;
    a base-side trial only for a paired property of a run with a base tree."""
    props = {p.id: p for p in facts.suite.properties}

    def spec_of(image_id: str, property_id: str, index: int, canary: str, side: Side) -> TrialSpec | None:
        prop = props.get(property_id)
        if prop is None or not 0 <= index < prop.planned_trials() or side not in trees:
            return None
        if side is Side.BASE and not isinstance(prop.rule(), PairedRule):
            return None
        planner = replace(planner_for(replace(facts, image_id=image_id), trees[side]), side=side)
        [spec] = planner.trials(prop, index, 1)
        return spec.model_copy(update={"canary": canary})

    return spec_of


def _only(suite: Suite, chosen: tuple[str, ...]) -> tuple[PropertySpec, ...]:
    return tuple(p for p in suite.properties if p.id in chosen)


def _run_image(request: RunRequest, source: ImageSource | None, image_factory: ImageFactory | None) -> str | None:
    """The image trials run in: the suite's project image (built from the base's definition), else --image."""
    if source is None:
        return request.image
    if request.image:
        raise UsageError(f"the suite names its image ([suite.image] {source.label}); drop --image", field="--image")
    if image_factory is None:
        raise UsageError("the suite names a project image, but this command cannot build images")
    return image_factory(source)


def file_books(request: RunRequest, suite: Suite) -> BooksStore:
    """The default books: a locked JSON file, `--ledger` or `ledger.json` beside the card."""
    path = request.ledger or _card(request).parent / "ledger.json"
    # Checked here too: beside a card the suite names, the command line could not check it.
    check_writable(path, "--ledger")
    # The books and their lock file change after the run, so inside the tree they must be outputs.
    selection = tree_selection(suite, request.workdir, suite_file=request.suite)
    for written in (path, path.with_name(path.name + ".lock")):
        check_outside_tree(written, request.workdir, selection, field="--ledger")
    return FileBooks(path, suite.config.ledger, suite.config.sampler, create=request.new_ledger)
