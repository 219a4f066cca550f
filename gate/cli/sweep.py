"""`gate sweep`: remove probe containers whose run or worker process is gone (or a run's, or all)."""

from __future__ import annotations

import argparse
import json

from gate.core.errors import RET_OK


def add_sweep_parser(sub: argparse._SubParsersAction) -> None:
    """The `sweep` subcommand."""
    sweep = sub.add_parser("sweep", help="remove probe containers whose run or worker process is gone")
    sweep.set_defaults(handler="gate.cli.sweep:sweep_command")
    which = sweep.add_mutually_exclusive_group()
    which.add_argument("--run", metavar="RUN_ID", help="remove this run's containers, running or not")
    which.add_argument("--all", action="store_true", help="remove every probe container, also of live runs")


def sweep_command(args: argparse.Namespace) -> int:
    """Remove the containers and print how many went, as one JSON line."""
    from worker.host.engine import docker_client
    from worker.host.sweep import sweep, sweep_dead_workers

    client = docker_client()
    removed = sweep(client, args.run) if args.run or args.all else sweep_dead_workers(client)
    print(json.dumps({"removed": removed, "run": args.run, "all": args.all}))
    return RET_OK
