"""`gate run`: seal check → plan → executor → fold → policy → card, once, with no retries.

Everything with a side effect (files, Docker, the clock, the run id) is gathered here and passed
into the pure core as values. `python -m gate.run` is the same command as `gate run`.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog
from pydantic import ValidationError

from gate import __version__
from gate.artifacts import read_json, write_card
from gate.card import FixtureBinding, HarnessEvent, PropertyRow, VerdictCard
from gate.checks import Trial, judge, load_checks
from gate.errors import FreezeFileError, HarnessError, InputMissingError, SealDriftError
from gate.executor import Executor, LocalExecutor, LocalInputs
from gate.fixtures import read_clock, read_seal_file, seal_tree, verify
from gate.freezes import FreezeFile, FreezeState, resolve
from gate.oracle import changed_files, oracle_hits
from gate.plan import check_fixtures, plan
from gate.policy import Decision, decide
from gate.state import load_books, save_books
from gate.suite import Suite, load_suite, one_line
from gate.trial import Observation, Sandbox
from gate.verdict import Verdict, fold, harness_verdict

log = structlog.get_logger("gate.run")


@dataclass(frozen=True)
class RunRequest:
    suite: Path
    workdir: Path
    fixture: Path | None
    seal: Path
    card: Path
    retries: int = 0
    base: str | None = None
    ledger: Path | None = None
    jobs: int | None = None
    image: str | None = None


@dataclass(frozen=True)
class RunResult:
    card: VerdictCard
    verdicts: tuple[Verdict, ...]


SandboxFactory = Callable[[RunRequest], Sandbox]


def docker_sandbox(request: RunRequest) -> Sandbox:
    """The default sandbox: Docker on this machine (imported late so the core never loads docker)."""
    from worker.sandbox import DockerSandbox

    return DockerSandbox(image=request.image) if request.image else DockerSandbox()


def run_gate(
    request: RunRequest,
    *,
    sandbox_factory: SandboxFactory = docker_sandbox,
    executor_factory: Callable[[Sandbox, RunRequest], Executor] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    run_id: str | None = None,
    emit: Callable[[str], None] = print,
) -> RunResult:
    """Run the suite once against the patched tree and write the card; config errors raise first."""
    suite = load_suite(request.suite)
    fixture_root = (request.fixture or suite.resolve(suite.config.fixtures)).resolve()
    checks = load_checks(suite.checks_path, {p.id: p.check for p in suite.properties}, suite_file=str(suite.path))
    expected = read_seal_file(request.seal)
    clock = read_clock(fixture_root)
    started = now()
    run_id = run_id or uuid.uuid4().hex
    ledger_path = request.ledger or request.card.parent / "ledger.json"
    ledger, window = load_books(ledger_path, suite.config.ledger, suite.config.sampler)

    drift: SealDriftError | None = None
    try:
        current = verify(fixture_root, expected, seal_file=str(request.seal))
    except SealDriftError as exc:
        drift, current = exc, seal_tree(fixture_root)
    if drift is None:
        check_fixtures(suite.properties, current.manifest, suite_file=str(suite.path))
    freezes = _freezes(suite, current.digest, started)
    oracle_edits = _oracle_edits(request, suite, fixture_root) if request.base else ()
    fixtures = {current.manifest[p.fixture]: (fixture_root / p.fixture).read_bytes()
                for p in suite.properties if p.fixture in current.manifest}
    log.info("run.start", run_id=run_id, suite=str(suite.path), seal=current.digest[:16], drift=drift is not None)

    events: list[HarnessEvent] = []
    image, image_id, verdicts = "", "", []
    durations: dict[str, tuple[float, ...]] = {}
    with LocalInputs(request.workdir, fixtures) as inputs:
        if drift is not None:
            verdicts = [harness_verdict(p.id, p.band, current.manifest.get(p.fixture, ""), str(drift))
                        for p in suite.properties]
        else:
            sandbox = sandbox_factory(request)
            image = getattr(sandbox, "image", "")
            try:
                image_id = sandbox.image_id()
            except HarnessError as exc:
                verdicts = [harness_verdict(p.id, p.band, current.manifest[p.fixture], str(exc))
                            for p in suite.properties]
            else:
                specs = plan(suite.properties, run_id=run_id, probe_argv=suite.config.probe,
                             tree_digest=inputs.tree_digest, manifest=current.manifest, clock=clock,
                             limits=suite.config.limits, suite_file=str(suite.path))
                executor = (executor_factory or _local)(sandbox, request)
                observed = _collect(executor.run(specs, inputs), events)
                verdicts = _fold_all(suite, observed, checks, fixtures, current.manifest, clock)
                for obs in sorted(observed.values(), key=lambda o: o.key):
                    durations[obs.property_id] = (*durations.get(obs.property_id, ()), round(obs.duration_s, 4))
        tree_digest = inputs.tree_digest

    decision = decide(verdicts, frozen=freezes.frozen, ledger=ledger, window=window, now=started)
    card = _card(request, suite, run_id, started, fixture_root, current.digest, current.manifest, tree_digest,
                 image, image_id, clock, oracle_edits, freezes, verdicts, decision, events, durations)
    write_card(request.card, card)
    save_books(ledger_path, decision.ledger.pruned(started), decision.window)
    for row in card.properties:
        emit(json.dumps({"kind": row.kind, "property_id": row.id, "band": row.band, "fixture_digest": row.fixture_digest,
                         "trials": row.trials, "hits": row.hits, "voting": row.voting, "detail": row.detail}))
    emit(json.dumps({"job": card.status, "exit_code": card.exit_code, "run_id": run_id,
                     "card": str(request.card), "reasons": list(card.reasons)}))
    log.info("run.done", run_id=run_id, status=card.status, exit_code=card.exit_code)
    return RunResult(card=card, verdicts=tuple(verdicts))


def _local(sandbox: Sandbox, request: RunRequest) -> Executor:
    return LocalExecutor(sandbox, jobs=request.jobs)


def _freezes(suite: Suite, seal: str, now: datetime) -> FreezeState:
    path = suite.freeze_path
    if path is None:
        return FreezeState()
    if not path.is_file():
        raise InputMissingError("freeze file named in the suite is missing", file=str(path))
    try:
        parsed = FreezeFile.model_validate(read_json(path, "freeze file"))
    except ValidationError as exc:
        raise FreezeFileError(one_line(exc), file=str(path)) from None
    return resolve(parsed, bands=suite.bands(), seal=seal, now=now, source=str(path))


def _oracle_edits(request: RunRequest, suite: Suite, fixture_root: Path) -> tuple[str, ...]:
    workdir = request.workdir.resolve()
    entry = next((a for a in suite.config.probe if a.endswith(".py")), None)
    files = [suite.path, suite.checks_path, request.seal.resolve()]
    files += [workdir / entry] if entry else []
    files += [suite.freeze_path] if suite.freeze_path else []
    changed = changed_files(workdir, request.base or "HEAD")
    return tuple(oracle_hits(changed, files=files, trees=[fixture_root], globs=list(suite.config.oracle),
                             root=suite.root))


def _collect(stream: Iterable[Observation], events: list[HarnessEvent]) -> dict[tuple[str, str, int], Observation]:
    """First result per trial key wins; a duplicate is a harness event, never a second vote."""
    seen: dict[tuple[str, str, int], Observation] = {}
    for obs in stream:
        if obs.key in seen:
            events.append(HarnessEvent(kind="duplicate_result", property_id=obs.property_id,
                                       detail=f"trial {obs.trial_index} reported twice; first result kept"))
            continue
        seen[obs.key] = obs
    return seen


def _fold_all(suite, observed, checks, fixtures, manifest, clock) -> list[Verdict]:
    verdicts = []
    for prop in suite.properties:
        digest = manifest[prop.fixture]
        mine = sorted((o for o in observed.values() if o.property_id == prop.id), key=lambda o: o.trial_index)
        outcomes = [judge(checks[prop.id], Trial(o, fixtures[digest], prop.params, clock), prop.band) for o in mine]
        missing = prop.planned_trials() - len(mine)
        verdict = fold(property_id=prop.id, band=prop.band, fixture_digest=digest, outcomes=outcomes,
                       rule=prop.rule(), timeout_is_safety=prop.timeout_is_safety)
        if missing > 0:
            verdict = harness_verdict(prop.id, prop.band, digest, f"{missing} planned trial(s) never reported")
        verdicts.append(verdict)
    return verdicts


def _card(request, suite, run_id, started, fixture_root, seal, manifest, tree_digest, image, image_id, clock,
          oracle_edits, freezes, verdicts, decision: Decision, events, durations) -> VerdictCard:
    by_id = {p.id: p for p in suite.properties}
    votes = {v.property_id: v for v in decision.votes}
    rows = []
    for v in verdicts:
        prop, vote = by_id[v.property_id], votes[v.property_id]
        rule = prop.rule()
        rows.append(PropertyRow(
            id=v.property_id, band=v.band, kind=v.kind, voting=vote.voting, frozen_by=vote.frozen_by,
            ledger=vote.ledger, trials=v.trials, hits=v.hits, interval=v.interval,
            rule=rule.model_dump() if rule else None, deadline_s=prop.deadline_s,
            timeout_is_safety=prop.timeout_is_safety, fixture=prop.fixture, fixture_digest=v.fixture_digest,
            detail=v.detail, durations_s=durations.get(v.property_id, ()),
        ))
    return VerdictCard(
        gate_version=__version__, run_id=run_id, created_at=started, suite=str(suite.path),
        suite_sha256=suite.sha256, workdir=str(request.workdir.resolve()), tree_digest=tree_digest,
        fixture=FixtureBinding(root=str(fixture_root), seal=seal, manifest=manifest), image=image,
        image_id=image_id, clock=clock, retry_count=request.retries, base_rev=request.base,
        new_oracle_edits=oracle_edits, freeze_set=freezes.frozen, freezes_inactive=freezes.inactive,
        properties=tuple(rows), ledger_actions=decision.ledger_actions, harness_events=tuple(events),
        status=decision.status, exit_code=decision.exit_code, reasons=decision.reasons,
    )


if __name__ == "__main__":
    from gate.cli import main

    sys.exit(main(["run", *sys.argv[1:]]))
