"""`gate pool serve`: keep sandbox containers started ahead of any run (worker/host/pool.py), so a
fresh `gate run` on this machine takes one instead of starting its own."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gate.cli.settings import settings_of
from gate.core.errors import UsageError
from gate.io import interrupts

if TYPE_CHECKING:
    from gate.core.suite.trial import Limits, WorkCopy


def add_pool_parser(sub: argparse._SubParsersAction) -> None:
    pool = sub.add_parser("pool", help="a standing pool of started sandbox containers for local runs")
    pool.set_defaults(handler="gate.cli.pool:run_pool")
    verbs = pool.add_subparsers(dest="pool_command", required=True)
    serve = verbs.add_parser("serve", help="keep containers ready until SIGINT/SIGTERM, then remove them all")
    serve.add_argument("--socket", type=Path, help="where to listen (default: $XDG_RUNTIME_DIR/probegate-pool.sock)")
    serve.add_argument("--size", type=int, help="containers kept ready per shape (default: one per CPU)")
    serve.add_argument("--image", help="the sandbox image tag (default: probegate's own)")


def run_pool(args: argparse.Namespace) -> int:
    """Serve a pool in the foreground; its socket is where `gate run` looks by default."""
    from gate.core.suite.trial import Limits
    from worker.host.engine import DEFAULT_IMAGE
    from worker.host.poolclient import default_socket
    from worker.host.sandboxes.docker import DockerSandbox

    size = args.size or os.cpu_count() or 2
    if not 1 <= size <= 64:
        raise UsageError(f"--size is {size}; it must be 1..64")
    host = settings_of(args).host
    sandbox = DockerSandbox(image=args.image or DEFAULT_IMAGE, pool="off", host=host)
    mode, _ = sandbox.work_copy()
    path = args.socket or default_socket(host.runtime_dir)
    _serve(path, size, sandbox.image_id(), Limits(), mode, tree_mount=host.tree_mount)
    return 0


def _serve(path: Path, size: int, image_id: str, limits: Limits, work_copy: WorkCopy, *, tree_mount: bool) -> None:
    """Run a pool in the foreground until SIGINT or SIGTERM (gate.io.interrupts raises them in this
    thread; a handler that set an Event could deadlock on the Event's own lock), then stop it."""
    from worker.host.pool import PoolServer

    server = PoolServer(path, size=size, tree_mount=tree_mount)
    try:
        server.start()
        server.want(image_id, limits, work_copy)
        say = f"probegate pool {server.label}: {size} containers of {image_id[:19]} ({work_copy.value}) on {path}"
        print(say, file=sys.stderr, flush=True)
        while True:
            signal.pause()
    except interrupts.Interrupted:
        pass  # the way a pool is meant to end
    finally:
        server.stop()
        print(f"probegate pool {server.label}: stopped, {server.started_total} started in all", file=sys.stderr)
