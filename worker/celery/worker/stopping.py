"""A `gate-worker` told to stop (SIGTERM, Ctrl-C) stops within seconds, whatever its batches are doing.

Celery's warm shutdown waits for every running task, and a batch of hanging probes runs for minutes.
So when the shutdown begins, the main process sends STOPPING_SIGNAL to each pool process; there it
raises `WorkerStopping` in the running batch, the sandbox removes the batch's containers (as it does
on Ctrl-C), and the task gives its message back to the broker (`Reject(requeue=True)`): another
worker runs the batch from scratch, and the coordinator never sees a half-run one. The worker exits
EXIT_AFTER_S after the signal at the latest.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from celery.signals import worker_process_init, worker_shutting_down

EXIT_AFTER_S = 3.0  # from the signal to the worker's exit, at the latest
STOPPING_SIGNAL = signal.SIGUSR2  # billiard keeps SIGUSR1 for soft time limits (worker.celery.shared.app.STOP_SIGNAL)


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
    # Runs in the main process's signal handler: a signal to each child and a thread, nothing that blocks.
    children = _children(os.getpid())
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, STOPPING_SIGNAL)
    threading.Thread(target=_exit_by_deadline, args=(children,), name="probegate-stop", daemon=True).start()


def _exit_by_deadline(children: list[int]) -> None:
    """Celery's own shutdown notices the signal up to a second late and joins its pool's threads, which
    poll once a second: by EXIT_AFTER_S the batches are given back and their containers gone, so what is
    left of it is cut short. Whatever a pool process still holds is removed first."""
    time.sleep(EXIT_AFTER_S)
    with contextlib.suppress(Exception):
        from worker.host.engine import containers, docker_client
        from worker.host.sweep import LABEL_PID

        client = docker_client()
        for pid in children:
            for container in containers(client, labels=[f"{LABEL_PID}={pid}"]):
                with contextlib.suppress(Exception):
                    container.remove()
    print("gate-worker: stopped (the rest of Celery's shutdown cut short)", file=sys.stderr, flush=True)
    os._exit(0)


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
