"""`gate pool serve`: keep sandbox containers started ahead of any run (worker/host/pool.py), so a
fresh `gate run` on this machine takes one instead of starting its own."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gate.core.errors import UsageError
from gate.core.trial import Limits


def add_pool_parser(sub: argparse._SubParsersAction) -> None:
    pool = sub.add_parser("pool", help="a standing pool of started sandbox containers for local runs")
    verbs = pool.add_subparsers(dest="pool_command", required=True)
    serve = verbs.add_parser("serve", help="keep containers ready until SIGINT/SIGTERM, then remove them all")
    serve.add_argument("--socket", type=Path, help="where to listen (default: $XDG_RUNTIME_DIR/probegate-pool.sock)")
    serve.add_argument("--size", type=int, help="containers kept ready per shape (default: one per CPU)")
    serve.add_argument("--image", help="the sandbox image tag (default: probegate's own)")


def run_pool(args: argparse.Namespace) -> int:
    """Serve a pool in the foreground; its socket is where `gate run` looks by default."""
    from worker.host.engine import DEFAULT_IMAGE
    from worker.host.pool import serve
    from worker.host.poolclient import default_socket
    from worker.host.sandbox import DockerSandbox

    size = args.size or os.cpu_count() or 2
    if not 1 <= size <= 64:
        raise UsageError(f"--size is {size}; it must be 1..64")
    sandbox = DockerSandbox(image=args.image or DEFAULT_IMAGE, pool="off")
    mode, _ = sandbox.work_copy()
    path = args.socket or default_socket()
    serve(path, size, sandbox.image_id(), Limits(), mode, log=lambda line: print(line, file=sys.stderr, flush=True))
    return 0
