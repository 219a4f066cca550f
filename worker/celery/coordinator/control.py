"""The coordinator's word with the workers over Celery's control channel: who is there, stop these
batches, the run is over.

`discover` finds how many processes serve the coordinator's queue and the direct queues (each worker
consumes its own) of those workers; `direct_queues` those of every worker, asked when the first cross-check is
sent (a worker that died mid-run is then not among them). A broadcast to every worker waits out its whole reply
window (1 s: who else would answer is not known), so each is made once per executor; the follow-up to the
workers `discover` found returns as soon as each has answered. With a roster and the shared queue, a worker
confined to its own direct queue (its own ACL user, worker.celery.coordinator.acl) serves the run too: the coordinator
assigns it batches on that queue (worker.celery.coordinator.assigner). Telling workers to stop or to end a run never
raises and waits a bounded time: a broker outage must not change the verdict, nor hold up Ctrl-C.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from celery import Celery

from gate.core.errors import BrokerError
from worker.celery.shared.app import CONTROL_CLOSE_RUN, DIRECT_PREFIX, SHARED_QUEUE, STOP_SIGNAL, direct_queue
from worker.celery.shared.broker import broker_call

# A control message is dropped by a worker whose clock is past its expiry: allow for skewed clocks.
CLOSE_EXPIRES_S = 300.0


class WorkerControl:
    """The gate-worker processes serving `queue` on `app`'s broker (`enrolled`: a worker registry is in force),
    and the runs they were sent batches of."""

    def __init__(self, app: Celery, queue: str, *, wait_s: float, enrolled: bool) -> None:
        self.app, self.queue, self.wait_s, self.enrolled = app, queue, wait_s, enrolled
        self._processes = 0
        self._direct: tuple[str, ...] | None = None  # every worker's own queue, asked once (cross-checks)
        self._dispatched: set[str] = set()  # runs with batches sent: only those have containers to close
        # The direct queues of the workers on our queue (asked with `discover`): where batches can be assigned.
        self.on_queue: frozenset[str] = frozenset()
        self._by_queue: dict[str, int] = {}  # direct queue -> its worker's pool processes (the worker's word)

    def discover(self) -> int:
        """Worker processes consuming our queue, waiting up to `wait_s` for the first."""
        if self._processes:
            return self._processes
        give_up = time.monotonic() + self.wait_s
        while True:
            try:
                with broker_call("asking for workers"):
                    stats = self.app.control.inspect(timeout=1.0).active_queues() or {}
                    workers = [name for name, queues in stats.items() if self.serves(queues)]
                    if workers:
                        self.on_queue = frozenset(
                            q["name"] for name in workers for q in stats[name] if q["name"].startswith(DIRECT_PREFIX)
                        )
                        named = self.app.control.inspect(timeout=1.0, destination=workers, limit=len(workers))
                        pools = named.stats() or {}
                        for name in workers:
                            count = _concurrency(pools.get(name))
                            self._by_queue.update(
                                {q["name"]: count for q in stats[name] if q["name"].startswith(DIRECT_PREFIX)}
                            )
                        processes = sum(_concurrency(s) for s in pools.values())
                        self._processes = processes or len(workers)
                        return self._processes
            except BrokerError:
                pass
            if time.monotonic() >= give_up:
                return 0
            time.sleep(0.5)

    def processes_of(self, keys: Iterable[str]) -> dict[str, int]:
        """Each enrolled key's pool processes as its worker reported them to `discover` (1 when not known)."""
        return {key: self._by_queue.get(direct_queue(key), 1) for key in keys}

    def direct_queues(self) -> tuple[str, ...]:
        """The direct queues of the workers on the broker (each consumes its own), asked once."""
        if self._direct is None:
            try:
                with broker_call("asking for workers' direct queues"):
                    stats = self.app.control.inspect(timeout=1.0).active_queues() or {}
            except BrokerError:
                return ()
            names = {q["name"] for queues in stats.values() for q in queues if q["name"].startswith(DIRECT_PREFIX)}
            self._direct = tuple(sorted(names))
        return self._direct

    def serves(self, queues: Sequence[dict[str, Any]]) -> bool:
        """Whether a worker consuming `queues` serves this executor: it consumes our queue, or, with a roster
        and the shared queue, it is confined to its own direct queue (its own ACL user,
        worker.celery.coordinator.acl)."""
        names = [q["name"] for q in queues]
        if self.queue in names:
            return True
        confined = bool(names) and all(name.startswith(DIRECT_PREFIX) for name in names)
        return self.enrolled and self.queue == SHARED_QUEUE and confined

    def busy(self, run_ids: Iterable[str]) -> None:
        """Note runs that batches were sent for: workers may hold containers of theirs."""
        self._dispatched.update(run_ids)

    def stop(self, tasks: list[str], wait_s: float) -> None:
        """Revoke `tasks` and stop those running in their worker process (which removes its containers,
        worker.celery.worker.tasks), waiting at most `wait_s` for the broker."""

        def revoke() -> None:
            with contextlib.suppress(BrokerError), broker_call("revoking the run's batches"):
                self.app.control.revoke(tasks, terminate=True, signal=STOP_SIGNAL)

        if tasks:
            _bounded(revoke, "probegate-revoke", wait_s)

    def end_run(self, run_id: str, wait_s: float) -> None:
        """Broadcast the run's end (workers remove its containers), waiting at most `wait_s` for it."""
        if run_id not in self._dispatched:
            return
        self._dispatched.discard(run_id)

        def broadcast() -> None:
            with contextlib.suppress(BrokerError), broker_call("broadcasting the run's end"):
                self.app.control.broadcast(
                    CONTROL_CLOSE_RUN, arguments={"run_id": run_id}, reply=False, timeout=CLOSE_EXPIRES_S
                )

        _bounded(broadcast, "probegate-close-run", wait_s)


def _concurrency(stats: Any) -> int:
    """A worker's pool processes from its `stats` reply (1 when it says nothing usable)."""
    pool = stats.get("pool") if isinstance(stats, dict) else None
    count = pool.get("max-concurrency") if isinstance(pool, dict) else None
    return count if isinstance(count, int) and count > 0 else 1


def _bounded(call: Callable[[], None], name: str, wait_s: float) -> None:
    """Run `call` on a daemon thread and wait at most `wait_s` for it (kombu retries a lost broker for longer)."""
    sender = threading.Thread(target=call, name=name, daemon=True)
    sender.start()
    sender.join(wait_s)
