"""The `gate` command line: setup, doctor, init, seal, reseal, run, baseline, accept, report, diff, refold, evidence,
keys, sign, workers, image, power, sweep, pool, schema. Every user mistake is one line on stderr and a
documented exit code (see gate.core.errors); only a bug in the gate prints a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import select
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from gate.cli.arguments import build_parser
from gate.cli.books import books_factory, ledger_file, ledger_url
from gate.cli.executors import Placement, enrolled_workers, executor_factory
from gate.cli.images import build_for_run, run_image
from gate.cli.power import run_from_args as run_power
from gate.cli.report import report_targets
from gate.cli.signing import sign_key_path
from gate.core.errors import (
    RET_INTERNAL,
    RET_INTERRUPTED,
    RET_OK,
    RET_PIPE,
    GateError,
    InputMissingError,
    UsageError,
)
from gate.io import interrupts
from gate.io.cliargs import check_redis_url

if TYPE_CHECKING:  # the run machinery loads only once a run has passed its argument checks
    from gate.run.request import RunRequest

EXIT_GRACE_S = 2.0  # after Ctrl-C, how long exit waits for threads still returning from a removed container
# Loading a command builds about 100,000 long-lived objects (the models' schemas, the engine client's regexes):
# at the interpreter's default threshold (700) the cyclic collector walks them over and over and frees nothing,
# a noticeable share of the CPU a run's imports take. Collections stay on.
GC_THRESHOLD = 50_000


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `gate` command and return its exit code (gate.core.errors); only a bug prints a traceback."""
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version: printed, exit 0 (mistakes raise UsageError instead)
            sys.stdout.flush()
            return exc.code if isinstance(exc.code, int) else RET_OK
        with interrupts.routed():  # SIGINT/SIGTERM: everything started is removed, then exit 128+signal
            code = _dispatch(args)
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at interpreter exit
        return code
    except GateError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print("gate: interrupted", file=sys.stderr)
        return exc.exit_code if isinstance(exc, interrupts.Interrupted) else RET_INTERRUPTED
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            return _quiet_stdout()
        traceback.print_exc()
        print("gate: internal error (a bug in probegate; please report it with the traceback above)", file=sys.stderr)
        return RET_INTERNAL


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The console script: `main`, then exit. After a signal the interpreter's own exit (which joins
    the thread pools' threads) gets EXIT_GRACE_S, not more: everything of ours a thread still busy
    could touch is removed already, so a slow engine call must not hold the exit."""
    code = main(argv)
    if interrupts.interrupted():
        threading.Thread(target=_exit_after, args=(code,), name="probegate-exit", daemon=True).start()
    sys.exit(code)


def _exit_after(code: int) -> None:
    time.sleep(EXIT_GRACE_S)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "reseal":
        from gate.io.reseal import run_reseal

        # stdout as it is now: run_reseal's default is the one at its import (a test's capture, in process)
        return run_reseal(args.dir, args.seal, write=args.write)
    if args.command == "power":
        return run_power(args)
    if args.command == "seal":
        return _seal(args)
    if args.command == "run":
        return _run(args)
    if args.command == "baseline":
        return _baseline(args)
    if args.command == "flakes":
        from gate.cli.flakes import run_flakes

        placement = _placement(args)
        _log_to_stderr(args)
        return run_flakes(args, placement=placement, interpreter=interpreter_mode(args))
    if args.command == "accept":
        from gate.cli.accept import run_accept

        return run_accept(
            args.card,
            args.seal,
            workdir=args.workdir,
            suite=args.suite,
            base=args.base,
            allow_unchecked_oracle=args.allow_unchecked_oracle,
            allow_unenrolled_workers=args.allow_unenrolled_workers,
            allow_replayed_seeds=args.allow_replayed_seeds,
            key=args.key,
        )
    if args.command == "diff":
        from gate.cli.diff import run_diff

        return run_diff(args.card_a, args.card_b, as_json=args.json)
    if args.command == "refold":
        from gate.cli.refold import run_refold

        return run_refold(args.card, key=args.key)
    if args.command == "evidence":
        from gate.cli.evidence import run_evidence

        return run_evidence(args)
    if args.command in ("keys", "sign"):
        from gate.cli.signing import run_keys, run_sign

        return run_keys(args) if args.command == "keys" else run_sign(args)
    if args.command == "report":
        from gate.cli.report import run_report

        return run_report(args)
    if args.command == "sweep":
        from worker.host.engine import docker_client
        from worker.host.sweep import sweep, sweep_dead_workers

        client = docker_client()
        removed = sweep(client, args.run) if args.run or args.all else sweep_dead_workers(client)
        print(json.dumps({"removed": removed, "run": args.run, "all": args.all}))
        return RET_OK
    if args.command == "image":
        return run_image(args)
    if args.command == "workers":
        from gate.cli.workers import run_workers

        return run_workers(args)
    if args.command == "pool":
        from gate.cli.pool import run_pool

        return run_pool(args)
    if args.command == "setup":
        from gate.cli.setup import run_setup

        return run_setup(args)
    if args.command == "doctor":
        from gate.cli.doctor import run_doctor

        return run_doctor(args)
    if args.command == "init":
        from gate.cli.init import run_init

        return run_init(args.dir)
    if args.command == "schema":
        print(json.dumps(_schema(args.what), indent=2))
        return RET_OK
    raise UsageError(f"unknown command {args.command}")


def _schema(what: str) -> dict[str, Any]:
    """The JSON schema of the verdict card, or of gate.toml (its `[suite]` table and `[[property]]` list)."""
    if what == "card":
        from gate.core.card.card import VerdictCard

        return VerdictCard.model_json_schema()
    from pydantic import ConfigDict, Field, create_model

    from gate.core.suite.suite import PropertySpec, SuiteConfig

    suite_file = create_model(
        "SuiteFile",
        __config__=ConfigDict(extra="forbid"),
        suite=(SuiteConfig, SuiteConfig()),
        property=(list[PropertySpec], Field(min_length=1)),
    )
    return suite_file.model_json_schema()


def _stdout_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone (poll reports POLLERR/POLLHUP)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (e.g. captured in tests)
        return False


def _quiet_stdout() -> int:
    """Stop writing to the closed pipe, as the CPython docs advise: point stdout at /dev/null so the
    final flush at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return RET_PIPE


def _seal(args: argparse.Namespace) -> int:
    from gate.io.artifacts import check_writable
    from gate.io.fixtures import seal_tree, write_seal_file
    from gate.io.reseal import check_seal_outside

    if args.write:
        check_seal_outside(args.write, args.dir, "--write")  # as `gate reseal` refuses it
        check_writable(args.write, "--write")
    seal = seal_tree(args.dir)
    if args.write:
        write_seal_file(args.write, seal)
    print(seal.digest)
    return RET_OK


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
    )


INTERPRETER_ENV = "PROBEGATE_INTERPRETER"
# gate.io.workers.ENV_REQUIRE (deprecated), written out: that module loads the enrolment's crypto, which a
# local run never needs.
ENV_REQUIRE = "PROBEGATE_REQUIRE_SIGNED"


def interpreter_mode(args: argparse.Namespace) -> Literal["fresh", "warm"] | None:
    """--interpreter, else $PROBEGATE_INTERPRETER, else None (the suite's own mode)."""
    chosen = getattr(args, "interpreter", None) or os.environ.get(INTERPRETER_ENV) or None
    if chosen not in (None, "fresh", "warm"):
        raise UsageError(f"must be fresh or warm, not {chosen!r}", field=f"${INTERPRETER_ENV}")
    return chosen


def _run(args: argparse.Namespace) -> int:
    placement = _placement(args)
    request = _request(args, card=args.card, placement=placement)
    from gate.cli.progress import progress_for
    from gate.cli.summary import print_summary
    from gate.run.runner import run_gate

    _log_to_stderr(args)
    result = run_gate(
        request,
        executor_factory=executor_factory(placement),
        books_factory=books_factory(args),
        image_factory=build_for_run,
        progress=progress_for(sys.stderr),  # bars only when stderr is a terminal
    )
    print_summary(result.card, file=sys.stderr)
    return result.card.exit_code


def _baseline(args: argparse.Namespace) -> int:
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
    placement = _placement(args)
    request = _request(args, card=card, placement=placement)
    from gate.cli.progress import progress_for
    from gate.run.baseline import run_baseline

    _log_to_stderr(args)
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


def _placement(args: argparse.Namespace) -> Placement:
    """Where `run` and `baseline` send trials, from their arguments (checked by `_request`). A broker
    without a worker registry is refused here, before the suite is read or any image built."""
    allow = args.allow_unenrolled_workers
    enrolled = enrolled_workers(args.workers, allow_unenrolled=allow) if args.broker else None
    if os.environ.get(ENV_REQUIRE):
        # What it asked for is the default now; said so that a stale setting is noticed and dropped.
        print(
            f"gate: warning: ${ENV_REQUIRE} is deprecated and ignored: a run with --broker always needs a worker "
            "registry now (or --allow-unenrolled-workers)",
            file=sys.stderr,
        )
    return Placement(
        jobs=args.jobs,
        broker=args.broker,
        registry=args.registry or os.environ.get("PROBEGATE_REGISTRY") or None,
        queue=args.queue or os.environ.get("PROBEGATE_QUEUE") or None,
        worker_wait_s=args.worker_wait,
        result_timeout_s=args.result_timeout,
        room=args.room,
        enrolled=enrolled,
    )


def _log_to_stderr(args: argparse.Namespace) -> None:
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
