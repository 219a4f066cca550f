"""The `gate` command line: seal, run, accept, schema. Every user mistake is one line on stderr
and a documented exit code (see gate.errors); only a bug in the gate prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from gate import __version__
from gate.cli.books import add_ledger_arguments, add_new_ledger_argument, books_factory, ledger_file, ledger_url
from gate.cli.executors import default_executor
from gate.cli.power import add_power_parser
from gate.cli.power import run_from_args as run_power
from gate.core.errors import RET_INTERNAL, RET_OK, RET_PIPE, GateError, InputMissingError, UsageError
from gate.io.artifacts import check_writable
from gate.io.cliargs import ArgParser
from gate.run.runner import RunRequest

# 128 + SIGPIPE: stdout's reader went away (e.g. `gate schema card | head -1`). What a shell reports
# for a program the signal killed, and never 0: `gate accept | …` with a closed pipe must not pass.


def build_parser() -> argparse.ArgumentParser:
    parser = ArgParser(prog="gate", description="Seal fixtures, run probes in sandboxes, stamp a verdict card.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgParser)

    seal = sub.add_parser("seal", help="print the seal of a fixture tree")
    seal.add_argument("dir", type=Path)
    seal.add_argument("--write", type=Path, metavar="FILE", help="also write the seal file")

    reseal = sub.add_parser("reseal", help="check the seal file against the tree; --write replaces it")
    reseal.add_argument("dir", type=Path, help="the fixture tree")
    reseal.add_argument("--seal", type=Path, required=True, metavar="FILE", help="the seal file to check")
    reseal.add_argument("--write", action="store_true", help="replace a stale or missing seal file")
    add_power_parser(sub)

    run = sub.add_parser("run", help="run the suite once against a patched tree and write the card")
    add_run_arguments(run)
    run.add_argument("--calibration", type=Path, help="baseline calibration (default: the suite's `calibration`)")
    add_new_ledger_argument(run)

    base = sub.add_parser("baseline", help="run the suite on the unpatched tree and write the calibration")
    add_run_arguments(base, card_required=False)
    base.add_argument("--calibration", type=Path, required=True, help="calibration file to write")
    base.add_argument("--factor", type=finite, default=1.5, help="proposed deadline = p95 x factor (default 1.5)")

    acc = sub.add_parser("accept", help="exit 0 only when the card allows the merge")
    add_accept_arguments(acc)

    sweep = sub.add_parser("sweep", help="remove probe containers whose run or worker process is gone")
    which = sweep.add_mutually_exclusive_group()
    which.add_argument("--run", metavar="RUN_ID", help="remove this run's containers, running or not")
    which.add_argument("--all", action="store_true", help="remove every probe container, also of live runs")

    schema = sub.add_parser("schema", help="print a JSON schema")
    schema.add_argument("what", choices=["card"])
    return parser


def add_run_arguments(run: argparse.ArgumentParser, *, card_required: bool = True) -> None:
    run.add_argument("--suite", type=Path, default=Path("gate.toml"), help="suite file (default ./gate.toml)")
    run.add_argument("--workdir", type=Path, default=Path("."), help="the patched tree (default .)")
    run.add_argument("--fixture", type=Path, help="fixture tree (default: the suite's `fixtures`)")
    run.add_argument("--seal", type=Path, required=True, help="seal file of the fixture tree")
    run.add_argument("--retries", type=int, default=0, help="recorded on the card; anything but 0 fails accept")
    run.add_argument("--card", type=Path, required=card_required, help="where to write the verdict card")
    run.add_argument("--base", metavar="GIT_REV", help="list oracle files the patch changed since this revision")
    add_ledger_arguments(run)
    run.add_argument("--jobs", type=int, help="parallel sandbox calls (default: cpu count)")
    run.add_argument("--image", help="sandbox image tag (default: the bundled sandbox image)")
    run.add_argument(
        "--broker", metavar="URL", help="run trials on gate-worker processes over Redis (redis:// or rediss://)"
    )
    run.add_argument(
        "--worker-wait",
        type=seconds,
        default=30.0,
        metavar="S",
        help="with --broker: how long to wait for a worker before harness_error (default 30)",
    )
    run.add_argument(
        "--result-timeout",
        type=seconds,
        metavar="S",
        help="with --broker: give up on unreported batches after S seconds (default: derived)",
    )


def add_accept_arguments(acc: argparse.ArgumentParser) -> None:
    acc.add_argument("--card", type=Path, required=True)
    acc.add_argument("--seal", type=Path, required=True)
    acc.add_argument("--workdir", type=Path, default=Path("."), help="the tree being merged (default .)")
    acc.add_argument("--suite", type=Path, default=Path("gate.toml"), help="suite file (default ./gate.toml)")
    acc.add_argument(
        "--base", metavar="GIT_REV", help="read the oracle from this revision and recompute the oracle edits"
    )
    acc.add_argument(
        "--allow-unchecked-oracle",
        action="store_true",
        help="accept a card from a run without --base, whose oracle edits nobody checked",
    )


def finite(text: str) -> float:
    """argparse type: a finite float (float() alone takes "nan" and "inf")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds above 0."""
    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `gate` command and return its exit code (gate.core.errors); only a bug prints a traceback."""
    from gate.cli import logs

    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version: printed, exit 0 (mistakes raise UsageError instead)
            sys.stdout.flush()
            return exc.code if isinstance(exc.code, int) else RET_OK
        logs.configure(args.log_level)
        code = _dispatch(args)
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at interpreter exit
        return code
    except GateError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gate: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            return _quiet_stdout()
        traceback.print_exc()
        print("gate: internal error (a bug in probegate; please report it with the traceback above)", file=sys.stderr)
        return RET_INTERNAL


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "reseal":
        from gate.io.reseal import run_reseal

        return run_reseal(args.dir, args.seal, write=args.write)
    if args.command == "power":
        return run_power(args)
    if args.command == "seal":
        return _seal(args)
    if args.command == "run":
        return _run(args)
    if args.command == "baseline":
        return _baseline(args)
    if args.command == "accept":
        from gate.cli.accept import run_accept

        return run_accept(
            args.card,
            args.seal,
            workdir=args.workdir,
            suite=args.suite,
            base=args.base,
            allow_unchecked_oracle=args.allow_unchecked_oracle,
        )
    if args.command == "sweep":
        from worker.host.engine import docker_client
        from worker.host.sweep import sweep, sweep_dead_workers

        client = docker_client()
        removed = sweep(client, args.run) if args.run or args.all else sweep_dead_workers(client)
        print(json.dumps({"removed": removed, "run": args.run, "all": args.all}))
        return RET_OK
    if args.command == "schema":
        from gate.core.card import VerdictCard

        print(json.dumps(VerdictCard.model_json_schema(), indent=2))
        return RET_OK
    raise UsageError(f"unknown command {args.command}")


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
    from gate.io.fixtures import seal_tree, write_seal_file

    if args.write:
        check_writable(args.write, "--write")
    seal = seal_tree(args.dir)
    if args.write:
        write_seal_file(args.write, seal)
    print(seal.digest)
    return RET_OK


def _request(args: argparse.Namespace, *, card: Path) -> RunRequest:
    """The run request both `run` and `baseline` build from the shared arguments."""
    if args.retries < 0:
        raise UsageError("--retries must be 0 or more")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.broker and not args.broker.startswith(("redis://", "rediss://")):
        raise UsageError("must be a redis:// or rediss:// URL", field="--broker")
    try:
        workdir_found = args.workdir.is_dir()
    except OSError:  # e.g. ENAMETOOLONG, which pathlib does not swallow
        workdir_found = False
    if not workdir_found:
        raise InputMissingError("patched tree not found", file=str(args.workdir), field="--workdir")
    # The card and the ledger are written after every trial has run: refuse an unusable path now.
    outputs = {"--card": card}
    ledger = ledger_file(args)
    if args.command == "run" and ledger_url(args) is None:  # a baseline keeps its books in memory
        outputs["--ledger"] = ledger or card.parent / "ledger.json"
    _distinct(outputs, {"--suite": args.suite, "--seal": args.seal})
    for field, path in outputs.items():
        check_writable(path, field)
    return RunRequest(
        suite=args.suite,
        workdir=args.workdir,
        fixture=args.fixture,
        seal=args.seal,
        card=card,
        retries=args.retries,
        base=args.base,
        ledger=ledger,
        new_ledger=args.command == "run" and args.new_ledger,
        jobs=args.jobs,
        image=args.image,
        broker=args.broker,
        worker_wait_s=args.worker_wait,
        result_timeout_s=args.result_timeout,
        calibration=args.calibration if args.command == "run" else None,
    )


def _run(args: argparse.Namespace) -> int:
    from gate.cli.summary import print_summary
    from gate.run.runner import run_gate

    request = _request(args, card=args.card)
    result = run_gate(request, executor_factory=default_executor, books_factory=books_factory(args))
    print_summary(result.card, file=sys.stderr)
    return result.card.exit_code


def _baseline(args: argparse.Namespace) -> int:
    from gate.run.baseline import run_baseline

    if args.factor < 1:
        raise UsageError("--factor below 1 would propose deadlines the base tree already misses")
    check_writable(args.calibration, "--calibration")  # first: with_name() raises on "/" or "."
    card = args.card or args.calibration.with_name("baseline-card.json")
    _distinct({"--calibration": args.calibration, "--card": card}, {"--suite": args.suite, "--seal": args.seal})
    return run_baseline(
        _request(args, card=card), args.calibration, factor=args.factor, executor_factory=default_executor
    )


def _distinct(outputs: dict[str, Path], inputs: dict[str, Path]) -> None:
    """Refuse an output that would overwrite an input of the same run or another output."""
    taken = {os.path.abspath(path): field for field, path in inputs.items()}
    for field, path in outputs.items():
        key = os.path.abspath(path)
        if key in taken:
            raise UsageError(f"names the same file as {taken[key]}", file=str(path), field=field)
        taken[key] = field
