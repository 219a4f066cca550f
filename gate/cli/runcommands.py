"""The commands that run trials (`run`, `baseline`, `flakes explain`): their arguments checked and
turned into one request, and where their trials go (the local pool or Celery), before the run machinery
loads."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gate.cli.books import books_factory, ledger_file, ledger_url
from gate.cli.executors import Placement, enrolled_workers, executor_factory
from gate.cli.images import build_for_run
from gate.cli.report import report_targets
from gate.cli.settings import ENV_REQUIRE, INTERPRETER_ENV, settings_of
from gate.cli.signing import sign_key_path
from gate.core.errors import InputMissingError, UsageError
from gate.io.cliargs import check_redis_url

if TYPE_CHECKING:  # the run machinery loads only once a run has passed its argument checks
    from gate.run.request import RunRequest


def _request(args: argparse.Namespace, *, card: Path | None, placement: Placement) -> RunRequest:
    """The run request both `run` and `baseline` build from the shared arguments and where trials go.
    `card` or `--seal` None: the suite's `[suite] card` / `[suite] seal`, checked once the suite is read
    (before any trial)."""
    from gate.io.artifacts import check_writable

    if args.retries < 0:
        raise UsageError("--retries must be 0 or more")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.broker:
        check_redis_url(args.broker, "--broker")
    try:
        workdir_found = args.workdir.is_dir()
    except OSError:  # e.g. ENAMETOOLONG, which pathlib does not swallow
        workdir_found = False
    if not workdir_found:
        raise InputMissingError("patched tree not found", file=str(args.workdir), field="--workdir")
    # The card and the ledger are written after every trial has run: refuse an unusable path now.
    outputs = {"--card": card} if card else {}
    sign_key = sign_key_path(args) if args.command == "run" else None
    if sign_key is not None and card is not None:
        from gate.io.cardsig import envelope_path  # only a signed run loads the crypto

        outputs["--sign-key envelope"] = envelope_path(card)
    reports = report_targets(args)
    outputs.update(reports.outputs())
    ledger = ledger_file(args)
    keeps_books = args.command == "run" or getattr(args, "twice", False)  # a lone baseline's are in memory
    if keeps_books and ledger_url(args) is None:
        # Beside the suite's card, the default ledger is checked by the run once the suite is read.
        path = ledger or (card.parent / "ledger.json" if card else None)
        if path is not None:
            outputs["--ledger"] = path
    _distinct(outputs, {**_inputs(args), **({"--sign-key": sign_key} if sign_key else {})})
    for field, path in outputs.items():
        check_writable(path, field)
    from gate.run.request import RunRequest  # last: a refused argument never loads the run machinery

    return RunRequest(
        suite=args.suite,
        workdir=args.workdir,
        fixture=args.fixture,
        seal=args.seal,
        card=card,
        retries=args.retries,
        base=args.base,
        ledger=ledger,
        new_ledger=getattr(args, "new_ledger", False),
        image=args.image,
        cross_check=args.cross_check,
        calibration=args.calibration if args.command == "run" else None,
        reports=reports,
        properties=tuple(getattr(args, "property", ())),
        keyword=getattr(args, "keyword", None),
        sign_key=sign_key,
        unenrolled_workers=placement.unenrolled,
        seeds_from=getattr(args, "replay_seeds", None),
        resume=getattr(args, "resume", False),
        interpreter=interpreter_mode(args),
        state_dir=settings_of(args).state_dir,
    )


def interpreter_mode(args: argparse.Namespace) -> Literal["fresh", "warm"] | None:
    """--interpreter, else $PROBEGATE_INTERPRETER, else None (the suite's own mode)."""
    chosen = getattr(args, "interpreter", None) or settings_of(args).interpreter
    if chosen not in (None, "fresh", "warm"):
        raise UsageError(f"must be fresh or warm, not {chosen!r}", field=f"${INTERPRETER_ENV}")
    return chosen


def run_command(args: argparse.Namespace) -> int:
    placement = placement_of(args)
    request = _request(args, card=args.card, placement=placement)
    from gate.cli.progress import progress_for
    from gate.cli.summary import print_summary
    from gate.run.runner import run_gate

    log_to_stderr(args)
    result = run_gate(
        request,
        executor_factory=executor_factory(placement),
        books_factory=books_factory(args),
        image_factory=build_for_run,
        progress=progress_for(sys.stderr),  # bars only when stderr is a terminal
    )
    print_summary(result.card, file=sys.stderr)
    return result.card.exit_code


def baseline_command(args: argparse.Namespace) -> int:
    from gate.core.policy.history import runs_needed
    from gate.io.artifacts import check_writable

    if args.factor < 1:
        raise UsageError("--factor below 1 would propose deadlines the base tree already misses")
    if args.new_ledger and not args.twice:
        raise UsageError("a single baseline keeps its books in memory: it needs --twice", field="--new-ledger")
    try:
        runs_needed(args.lift_target)
    except ValueError as exc:
        raise UsageError(str(exc), field="--lift-target") from None
    check_writable(args.calibration, "--calibration")  # first: with_name() raises on "/" or "."
    card = args.card or args.calibration.with_name("baseline-card.json")
    ledger = ledger_file(args) if args.twice else None  # the pair's books must not be one of its outputs
    outputs = {"--calibration": args.calibration, "--card": card, **({"--ledger": ledger} if ledger else {})}
    _distinct({**outputs, **report_targets(args).outputs()}, _inputs(args))
    placement = placement_of(args)
    request = _request(args, card=card, placement=placement)
    from gate.cli.progress import progress_for
    from gate.run.baseline import run_baseline

    log_to_stderr(args)
    return run_baseline(
        request,
        args.calibration,
        factor=args.factor,
        twice=args.twice,
        books_factory=books_factory(args),
        lift_target=args.lift_target,
        executor_factory=executor_factory(placement),
        image_factory=build_for_run,
        progress=progress_for(sys.stderr),  # bars only when stderr is a terminal
    )


def placement_of(args: argparse.Namespace) -> Placement:
    """Where `run` and `baseline` send trials, from their arguments (checked by `_request`). A broker
    without a worker registry is refused here, before the suite is read or any image built."""
    allow = args.allow_unenrolled_workers
    settings = settings_of(args)
    enrolled = enrolled_workers(args.workers, allow_unenrolled=allow, settings=settings) if args.broker else None
    if settings.require_signed:
        # What it asked for is the default now; said so that a stale setting is noticed and dropped.
        print(
            f"gate: warning: ${ENV_REQUIRE} is deprecated and ignored: a run with --broker always needs a worker "
            "registry now (or --allow-unenrolled-workers)",
            file=sys.stderr,
        )
    return Placement(
        jobs=args.jobs,
        broker=args.broker,
        registry=args.registry or settings.registry,
        queue=args.queue or settings.queue,
        worker_wait_s=args.worker_wait,
        result_timeout_s=args.result_timeout,
        visibility_timeout_s=settings.visibility_timeout_s,
        host=settings.host,
        room=args.room,
        enrolled=enrolled,
    )


def log_to_stderr(args: argparse.Namespace) -> None:
    """Point structlog at stderr (its default is stdout, the verdict stream). Only the run machinery
    logs through it (gate.run.runner, gate.run.baserun), so only `run` and `baseline` pay for loading it."""
    from gate.cli import logs

    logs.configure(args.log_level)


def _inputs(args: argparse.Namespace) -> dict[str, Path]:
    """The inputs named on the command line that an output must not overwrite."""
    return {"--suite": args.suite, **({"--seal": args.seal} if args.seal else {})}


def _distinct(outputs: dict[str, Path], inputs: dict[str, Path]) -> None:
    """Refuse an output that would overwrite an input of the same run or another output."""
    taken = {os.path.abspath(path): field for field, path in inputs.items()}
    for field, path in outputs.items():
        key = os.path.abspath(path)
        if key in taken:
            raise UsageError(f"names the same file as {taken[key]}", file=str(path), field=field)
        taken[key] = field


def flakes_command(args: argparse.Namespace) -> int:
    """`gate flakes explain`: where its trials run, from the same flags as `run`."""
    from gate.cli.flakes import run_flakes

    where = placement_of(args)
    log_to_stderr(args)
    return run_flakes(args, placement=where, interpreter=interpreter_mode(args))
