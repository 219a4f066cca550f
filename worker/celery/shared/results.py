"""Where a batch's result lives. A batch sent to a worker's direct queue is answered under that queue's
name (`<queue>.results.celery-task-meta-<task id>`), so a worker's broker user may write its own results
and no other's (worker.celery.coordinator.acl); a batch from any other queue under Celery's plain key. The worker's
backend picks the place from the queue the coordinator routed the batch to; the coordinator reads each
batch's result from the place of the queue it sent the batch to, and nowhere else.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from celery import states
from celery.backends.redis import RedisBackend
from celery.exceptions import BackendStoreError
from kombu.utils.encoding import bytes_to_str

from worker.celery.shared.app import DIRECT_PREFIX

TASK_KEYPREFIX = "celery-task-meta-"
_DIRECT = re.compile(re.escape(DIRECT_PREFIX) + r"[A-Za-z0-9_.-]+")
_log = logging.getLogger(__name__)
_place: contextvars.ContextVar[str] = contextvars.ContextVar("probegate_result_place", default="")


def result_place(queue: str | None) -> str:
    """The prefix of the result keys of batches sent to `queue` ('' unless it is a direct queue)."""
    return f"{queue}.results." if queue and _DIRECT.fullmatch(queue) else ""


def result_key(task_id: str, queue: str | None) -> str:
    """The key the result of task `task_id`, sent to `queue`, is stored under."""
    return result_place(queue) + TASK_KEYPREFIX + task_id


class PlacedResults(RedisBackend):
    """Celery's Redis result backend, storing each task's state under the place of the queue its message
    was routed to (the routing key the coordinator gave it)."""

    def store_result(
        self, task_id: Any, result: Any, state: str, traceback: Any = None, request: Any = None, **kwargs: Any
    ) -> Any:
        info = getattr(request, "delivery_info", None) or {}
        token = _place.set(result_place(info.get("routing_key") if isinstance(info, Mapping) else None))
        try:
            return super().store_result(task_id, result, state, traceback, request, **kwargs)
        finally:
            _place.reset(token)

    def _store_result(
        self, task_id: Any, result: Any, state: str, traceback: Any = None, request: Any = None, **kwargs: Any
    ) -> Any:
        # Handed to this process's writer thread: the pool process starts its next batch at once instead of
        # waiting a round trip to the broker. One write, no read before it: a batch's first answer stays (SET
        # NX). Nothing subscribes to results (the coordinator polls their keys), so nothing is published.
        meta = self._get_result_meta(result=result, state=state, traceback=traceback, request=request)
        meta["task_id"] = bytes_to_str(task_id)
        value = self.encode(meta)
        if isinstance(value, str) and len(value) > self._MAX_STR_VALUE_SIZE:
            raise BackendStoreError("value too large for Redis backend", state=state, task_id=task_id)
        expires = self.failure_expires if state == states.FAILURE else self.expires
        write = functools.partial(self.client.set, ex=expires or None, nx=True)
        _writer.put(functools.partial(self.ensure, write, (self.get_key_for_task(task_id), value)))
        return result

    def get_key_for_task(self, task_id: Any, key: str = "") -> Any:
        return self.key_t(_place.get()) + super().get_key_for_task(task_id, key)


class _Writer:
    """A thread of its own per process that stores results in the order given, retrying an unreachable broker
    (the backend's retry policy). A result it could not store is a batch never answered: the coordinator
    sends that batch elsewhere once the worker is gone, or ends it as harness faults."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def put(self, write: Callable[[], object]) -> None:
        with self._lock:
            if self._thread is None or self._pid != os.getpid():  # a forked pool process starts its own
                self._queue, self._pid = queue.SimpleQueue(), os.getpid()
                self._thread = threading.Thread(target=self._run, args=(self._queue,), name="probegate-results")
                self._thread.daemon = True
                self._thread.start()
            self._queue.put(write)

    def flush(self, timeout_s: float) -> bool:
        """Store every result given so far, waiting at most `timeout_s`; whether all were."""
        with self._lock:
            thread, self._thread = (self._thread, None) if self._pid == os.getpid() else (None, None)
            if thread is None:
                return True
            self._queue.put(None)
        thread.join(timeout_s)
        return not thread.is_alive()

    @staticmethod
    def _run(work: queue.SimpleQueue[Callable[[], object] | None]) -> None:
        while (write := work.get()) is not None:
            try:
                write()
            except Exception:  # the thread must outlive one bad write; that batch is then lost
                _log.exception("probegate: a batch result could not be stored")


_writer = _Writer()


def flush_results(timeout_s: float) -> bool:
    """Store every result this process handed to its writer thread (at a pool process's exit)."""
    return _writer.flush(timeout_s)


def read_ready(backend: RedisBackend, keys: Mapping[str, str], timeout: float, interval: float) -> dict[str, Any]:
    """Poll the result keys `keys` (task id -> key) until at least one holds a finished task's meta or
    `timeout` passes; returns task id -> meta of those finished (empty on timeout)."""
    ids = list(keys)
    give_up = time.monotonic() + timeout
    while ids:
        values = backend.client.mget([keys[task] for task in ids])
        ready = {}
        for task, value in zip(ids, values, strict=True):
            if value is not None and (meta := backend.decode_result(value)).get("status") in states.READY_STATES:
                ready[task] = meta
        if ready:
            return ready
        left = give_up - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(interval, left))
    return {}
