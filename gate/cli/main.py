"""The `gate` command line: seal, run, accept, schema. Every user mistake is one line on stderr
and a documented exit code (see gate.errors); only a bug in the gate prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from gate.cli.executors import default_executor
from gate.cli.power import add_power_parser
from gate.cli.power import run_from_args as run_power
from gate.core.errors import RET_INTERNAL, RET_OK, GateError, InputMissingError, UsageError
from gate.io.cliargs import ArgParser
from gate.run.runner import RunRequest


def build_parser() -> argparse.ArgumentParser:
    parser = ArgParser(prog="gate", description="Seal fixtures, run probes in sandboxes, stamp a verdict card.")
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

    base = sub.add_parser("baseline", help="run the suite on the unpatched tree and write the calibration")
    add_run_arguments(base, card_required=False)
    base.add_argument("--calibration", type=Path, required=True, help="calibration file to write")
    base.add_argument("--factor", type=float, default=1.5, help="proposed deadline = p95 x factor (default 1.5)")

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
    run.add_argument("--ledger", type=Path, help="credit ledger + sampler window (default: ledger.json by the card)")
    run.add_argument("--jobs", type=int, help="parallel sandbox calls (default: cpu count)")
    run.add_argument("--image", help="sandbox image tag (default: the bundled sandbox image)")
    run.add_argument(
        "--broker", metavar="URL", help="run trials on gate-worker processes over Redis (redis:// or rediss://)"
    )
    run.add_argument(
        "--worker-wait",
        type=float,
        default=30.0,
        metavar="S",
        help="with --broker: how long to wait for a worker before harness_error (default 30)",
    )
    run.add_argument(
        "--result-timeout",
        type=float,
        metavar="S",
        help="with --broker: give up on unreported batches after S seconds (default: derived)",
    )


def add_accept_arguments(acc: argparse.ArgumentParser) -> None:
    acc.add_argument("--card", type=Path, required=True)
    acc.add_argument("--seal", type=Path, required=True)


def main(argv: Sequence[str] | None = None) -> int:
    from gate.cli import logs

    try:
        args = build_parser().parse_args(argv)
        logs.configure(args.log_level)
        return _dispatch(args)
    except GateError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gate: interrupted", file=sys.stderr)
        return 130
    except Exception:
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

        return run_accept(args.card, args.seal)
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


def _seal(args: argparse.Namespace) -> int:
    from gate.io.fixtures import seal_tree, write_seal_file

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
    if not args.workdir.is_dir():
        raise InputMissingError("patched tree not found", file=str(args.workdir), field="--workdir")
    return RunRequest(
        suite=args.suite,
        workdir=args.workdir,
        fixture=args.fixture,
        seal=args.seal,
        card=card,
        retries=args.retries,
        base=args.base,
        ledger=args.ledger,
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

    result = run_gate(_request(args, card=args.card), executor_factory=default_executor)
    print_summary(result.card, file=sys.stderr)
    return result.card.exit_code


def _baseline(args: argparse.Namespace) -> int:
    from gate.run.baseline import run_baseline

    if args.factor < 1:
        raise UsageError("--factor below 1 would propose deadlines the base tree already misses")
    card = args.card or args.calibration.with_name("baseline-card.json")
    return run_baseline(
        _request(args, card=card), args.calibration, factor=args.factor, executor_factory=default_executor
    )
