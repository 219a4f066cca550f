"""The argument groups of the commands that run trials (`run`, `baseline`, `flakes explain`): the
suite and trees they read, and where their trials run."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.cli.argtypes import room, seconds
from gate.cli.workers import add_registry_argument


def add_tree_arguments(run: argparse.ArgumentParser) -> None:
    """The suite, the tree and the fixtures a command runs trials of."""
    run.add_argument("--suite", type=Path, default=Path("gate.toml"), help="suite file (default ./gate.toml)")
    run.add_argument("--workdir", type=Path, default=Path("."), help="the patched tree (default .)")
    run.add_argument("--fixture", type=Path, help="fixture tree (default: the suite's `fixtures`)")
    run.add_argument("--seal", type=Path, help="seal file of the fixture tree (default: the suite's `seal`)")


def add_placement_arguments(run: argparse.ArgumentParser) -> None:
    """Where a command's trials run: the local pool, or Celery workers over a broker, and in which image."""
    run.add_argument("--jobs", type=int, help="parallel sandbox calls (default: cpu count)")
    run.add_argument("--image", help="sandbox image tag (default: the bundled sandbox image)")
    run.add_argument(
        "--broker", metavar="URL", help="run trials on gate-worker processes over Redis (redis:// or rediss://)"
    )
    run.add_argument(
        "--registry",
        metavar="HOST[:PORT]",
        help="with --broker: push the run's image there for workers to pull (default $PROBEGATE_REGISTRY; "
        "without one, images travel through the blob store)",
    )
    run.add_argument(
        "--queue", metavar="NAME", help="with --broker: the queue of a fleet (`gate-worker serve --queue`)"
    )
    run.add_argument(
        "--worker-wait",
        type=seconds,
        default=30.0,
        metavar="S",
        help="with --broker: how long to wait for a worker before harness_error (default 30)",
    )
    run.add_argument(
        "--room",
        type=room,
        metavar="N",
        help="with --broker: batches each worker process may hold at once, the next sent as each answer comes "
        "back (default 2); 0 sends each wave's batches at once round the workers and copies no straggler",
    )
    run.add_argument(
        "--result-timeout",
        type=seconds,
        metavar="S",
        help="with --broker: give up on unreported batches after S seconds (default: derived)",
    )
    add_registry_argument(
        run, also="; with --broker only results signed by its enrolled workers count, and a run without one refuses"
    )
    run.add_argument(
        "--interpreter",
        choices=("fresh", "warm"),
        help="run every trial in this interpreter mode, over the suite's `interpreter` (default "
        "$PROBEGATE_INTERPRETER, else the suite's): compare the modes before switching a suite",
    )
    run.add_argument(
        "--allow-unenrolled-workers",
        action="store_true",
        help="with --broker and no worker registry: take any worker's results (a loopback broker on this "
        "machine); recorded on the card, which `gate accept` then refuses unless given the same flag",
    )
