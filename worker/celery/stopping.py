"""A `gate-worker` told to stop (SIGTERM, Ctrl-C) stops within seconds, whatever its batches are doing.

Celery's warm shutdown waits for every running task, and a batch of hanging probes runs for minutes.
So when the shutdown begins, the main process sends STOPPING_SIGNAL to each pool process; there it
raises `WorkerStopping` in the running batch, the sandbox removes the batch's containers (as it does
on Ctrl-C), and the task gives its message back to the broker (`Reject(requeue=True)`): another
worker runs the batch from scratch, and the coordinator never sees a half-run one.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from celery.signals import worker_process_init, worker_shutting_down

STOPPING_SIGNAL = signal.SIGUSR2  # billiard keeps SIGUSR1 for soft time limits (worker.celery.app.STOP_SIGNAL)


class WorkerStopping(KeyboardInterrupt):
    """Raised in a pool process's running batch when its worker shuts down; the sandbox aborts on it."""


class _Batch:
    running = False  # a batch's trials are under way in this pool process
    stopping = False  # the worker is shutting down: start no batch


_batch = _Batch()


@contextlib.contextmanager
def stoppable() -> Iterator[None]:
    """The block (a batch's trials) raises WorkerStopping when the worker starts shutting down."""
    if _batch.stopping:
        raise WorkerStopping()
    _batch.running = True
    try:
        yield
    finally:
        _batch.running = False


def _on_stopping(signum: int, frame: FrameType | None) -> None:
    _batch.stopping = True
    if _batch.running:  # outside a batch (idle, or encoding a result) there is nothing to cut short
        _batch.running = False
        raise WorkerStopping()


@worker_process_init.connect
def _listen_in_pool_process(**_: Any) -> None:
    signal.signal(STOPPING_SIGNAL, _on_stopping)


@worker_shutting_down.connect
def _stop_pool_processes(**_: Any) -> None:
    # Runs in the main process's signal handler: only a signal to each child, nothing that blocks.
    for pid in _children(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, STOPPING_SIGNAL)


def _children(parent: int) -> list[int]:
    """The pids whose parent is `parent` (the prefork pool's processes), read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The command name (field 2) may hold spaces and parentheses: the fields after the last ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                found.append(int(stat.parent.name))
    return found
