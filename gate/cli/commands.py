"""Which function answers each `gate` command: the composition root's dispatch table. Each entry imports
its command's module only when that command runs, so parsing arguments stays cheap."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from gate.cli.images import run_image
from gate.cli.power import run_from_args as run_power
from gate.cli.runcommands import baseline_command, flakes_command, run_command
from gate.cli.settings import settings_of
from gate.core.errors import RET_OK, UsageError

Handler = Callable[[argparse.Namespace], int]


def dispatch(args: argparse.Namespace) -> int:
    """Run the command `args` names; its exit code."""
    handler = HANDLERS.get(args.command)
    if handler is None:
        raise UsageError(f"unknown command {args.command}")
    return handler(args)


def _reseal(args: argparse.Namespace) -> int:
    from gate.io.reseal import run_reseal

    # stdout as it is now: run_reseal's default is the one at its import (a test's capture, in process)
    return run_reseal(args.dir, args.seal, write=args.write)


def _accept(args: argparse.Namespace) -> int:
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
        key=args.key or settings_of(args).accept_key,
    )


def _diff(args: argparse.Namespace) -> int:
    from gate.cli.diff import run_diff

    return run_diff(args.card_a, args.card_b, as_json=args.json)


def _refold(args: argparse.Namespace) -> int:
    from gate.cli.refold import run_refold

    return run_refold(args.card, key=args.key)


def _evidence(args: argparse.Namespace) -> int:
    from gate.cli.evidence import run_evidence

    return run_evidence(args)


def _keys(args: argparse.Namespace) -> int:
    from gate.cli.signing import run_keys

    return run_keys(args)


def _sign(args: argparse.Namespace) -> int:
    from gate.cli.signing import run_sign

    return run_sign(args)


def _report(args: argparse.Namespace) -> int:
    from gate.cli.report import run_report

    return run_report(args)


def _sweep(args: argparse.Namespace) -> int:
    from worker.host.engine import docker_client
    from worker.host.sweep import sweep, sweep_dead_workers

    client = docker_client()
    removed = sweep(client, args.run) if args.run or args.all else sweep_dead_workers(client)
    print(json.dumps({"removed": removed, "run": args.run, "all": args.all}))
    return RET_OK


def _workers(args: argparse.Namespace) -> int:
    from gate.cli.workers import run_workers

    return run_workers(args)


def _pool(args: argparse.Namespace) -> int:
    from gate.cli.pool import run_pool

    return run_pool(args)


def _setup(args: argparse.Namespace) -> int:
    from gate.cli.setup import run_setup

    return run_setup(args)


def _doctor(args: argparse.Namespace) -> int:
    from gate.cli.doctor import run_doctor

    return run_doctor(args)


def _init(args: argparse.Namespace) -> int:
    from gate.cli.init import run_init

    return run_init(args.dir)


def _print_schema(args: argparse.Namespace) -> int:
    print(json.dumps(_schema(args.what), indent=2))
    return RET_OK


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


HANDLERS: dict[str, Handler] = {
    "setup": _setup,
    "doctor": _doctor,
    "init": _init,
    "seal": _seal,
    "reseal": _reseal,
    "power": run_power,
    "run": run_command,
    "baseline": baseline_command,
    "flakes": flakes_command,
    "accept": _accept,
    "report": _report,
    "diff": _diff,
    "refold": _refold,
    "evidence": _evidence,
    "keys": _keys,
    "sign": _sign,
    "sweep": _sweep,
    "image": run_image,
    "workers": _workers,
    "pool": _pool,
    "schema": _print_schema,
}
