"""Run-scoped sandboxes on a Celery worker. Each pool process opens a run in its sandbox on the
first batch of it, so later batches of that run on the same process reuse its warm container. No
coordinator tells a process when a run is over, so a janitor thread closes runs left idle for
RUN_IDLE_S, and process shutdown closes the rest.

The coordinator's `CeleryExecutor.close` broadcasts CONTROL_CLOSE_RUN; that command runs in the worker's
main process, which owns no sandbox, so it removes the run's containers on this host by label, and
has the standing pool (if the worker uses one) remove those it handed out for the run. The pool
processes then find their warm containers dead, discard them, and their janitor closes the run.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from celery.signals import worker_process_shutdown
from celery.worker.control import control_command

from gate.core.errors import SandboxError
from gate.core.suite.sandbox import Sandbox
from worker.celery.shared.app import CONTROL_CLOSE_RUN
from worker.celery.worker.settings import current
from worker.host.engine import docker_client
from worker.host.poolclient import end_run, pool_socket
from worker.host.sweep import sweep
from worker.host.warm import HOST_IDLE_S

DEFAULT_RUN_IDLE_S = 20.0

log = logging.getLogger("probegate.worker.runs")


def run_idle_s() -> float:
    """How long a run with no batch in flight stays open (PROBEGATE_RUN_IDLE_S); ValueError if invalid."""
    raw = current().run_idle
    try:
        value = float(raw) if raw.strip() else DEFAULT_RUN_IDLE_S
    except ValueError:
        raise ValueError(f"PROBEGATE_RUN_IDLE_S must be a number of seconds, not {raw!r}") from None
    # The pool hands out no container idle longer than HOST_IDLE_S: a run open longer keeps nothing warm.
    if not 0 < value < HOST_IDLE_S:
        raise ValueError(f"PROBEGATE_RUN_IDLE_S must be above 0 and below {HOST_IDLE_S:g} seconds, not {raw!r}")
    return value


@dataclass
class _Run:
    in_flight: int = 0
    last_end: float = 0.0


class OpenRuns:
    """The runs open in this process's sandbox, with a janitor closing idle ones (thread-safe)."""

    def __init__(
        self, sandbox: Callable[[], Sandbox], idle_s: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._sandbox = sandbox
        self.idle_s = idle_s
        self._clock = clock
        # Held while opening and closing too, so a batch never lands in a run being closed under it.
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._janitor: threading.Thread | None = None

    @contextlib.contextmanager
    def serving(self, run_ids: Iterable[str]) -> Iterator[None]:
        """Open these runs (first sight only) for the duration of one batch."""
        wanted = set(run_ids)
        with self._lock:
            self._start_janitor()
            for run_id in wanted:
                if run_id not in self._runs:
                    self._sandbox().open(run_id)
                    self._runs[run_id] = _Run()
                self._runs[run_id].in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                now = self._clock()
                for run_id in wanted:
                    run = self._runs.get(run_id)
                    if run is not None:  # None: `close_all` closed it under this batch
                        run.in_flight -= 1
                        run.last_end = now

    def open_runs(self) -> list[str]:
        with self._lock:
            return sorted(self._runs)

    def close_idle(self) -> list[str]:
        """Close runs with nothing in flight whose last batch ended over `idle_s` ago."""
        with self._lock:
            now = self._clock()
            idle = [r for r, run in self._runs.items() if run.in_flight == 0 and now - run.last_end >= self.idle_s]
            for run_id in idle:
                self._close(run_id)
            return idle

    def close_all(self) -> list[str]:
        """Close every run, in flight or not: the process is going away."""
        with self._lock:
            closing = list(self._runs)
            for run_id in closing:
                self._close(run_id)
            return closing

    def _close(self, run_id: str) -> None:
        del self._runs[run_id]
        try:
            self._sandbox().close(run_id)
        except Exception:
            # The janitor must outlive a bad close; the worker's start-up sweep removes what is left.
            log.exception("closing run %s failed", run_id)

    def _start_janitor(self) -> None:
        if self._janitor is None:
            self._janitor = threading.Thread(target=self._sweep_forever, name="probegate-janitor", daemon=True)
            self._janitor.start()

    def _sweep_forever(self) -> None:
        tick = min(1.0, self.idle_s / 4)
        while True:
            time.sleep(tick)
            self.close_idle()


_runs: OpenRuns | None = None
_runs_lock = threading.Lock()


def open_runs(sandbox: Callable[[], Sandbox]) -> OpenRuns:
    """This process's open runs, made on first use (after the fork, like the sandbox)."""
    global _runs
    with _runs_lock:
        if _runs is None:
            _runs = OpenRuns(sandbox, run_idle_s())
        return _runs


@worker_process_shutdown.connect
def _close_on_exit(**_: Any) -> None:
    # Sent in each pool process as it exits; a process that ran no batch has nothing open.
    if _runs is not None:
        _runs.close_all()


@control_command(name=CONTROL_CLOSE_RUN, args=[("run_id", str)], signature="<run_id>")
def probegate_close_run(state: Any, run_id: str) -> dict[str, Any]:
    """Remove this host's containers of a finished run (runs in the worker's main process)."""
    if current().stub_sandbox:
        return {"ok": "stub sandbox"}
    # In a thread: removing containers takes a while, and this loop also hands out tasks.
    threading.Thread(target=sweep_run, args=(run_id,), name="probegate-close-run", daemon=True).start()
    return {"ok": f"removing containers of run {run_id}"}


def sweep_run(run_id: str) -> int:
    """Force-remove every container of `run_id` on this engine; never raises."""
    removed = 0
    try:
        client = docker_client()  # its own: the main process must not share a client with a fork
    except SandboxError as exc:
        log.warning("cannot remove containers of run %s: %s", run_id, exc)
        return 0
    try:
        # A container its pool process is removing meanwhile is skipped by sweep (docker's 409).
        removed = sweep(client, run_id)
    except SandboxError as exc:
        log.warning("removing containers of run %s failed: %s", run_id, exc)
    finally:
        client.close()
    removed += end_pooled(run_id)
    log.info("closed run %s: removed %d container(s)", run_id, removed)
    return removed


def end_pooled(run_id: str) -> int:
    """Have this worker's standing pool remove what it handed out for `run_id` (they carry the pool's
    labels, not the run's); never raises."""
    path = pool_socket(None, current().host)
    if path is None:
        return 0
    try:
        return end_run(path, run_id)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("the pool at %s did not remove run %s's containers: %s", path, run_id, exc)
        return 0
