"""Where a batch's result lives. A batch sent to a worker's direct queue is answered under that queue's
name (`<queue>.results.celery-task-meta-<task id>`), so a worker's broker user may write its own results
and no other's (worker.celery.coordinator.acl); a batch from any other queue under Celery's plain key. The worker's
backend picks the place from the queue the coordinator routed the batch to; the coordinator reads each
batch's result from the place of the queue it sent the batch to, and nowhere else.
"""

from __future__ import annotations

import contextvars
import re
import time
from collections.abc import Mapping
from typing import Any

from celery import states
from celery.backends.redis import RedisBackend

from worker.celery.shared.app import DIRECT_PREFIX

TASK_KEYPREFIX = "celery-task-meta-"
_DIRECT = re.compile(re.escape(DIRECT_PREFIX) + r"[A-Za-z0-9_.-]+")
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

    def get_key_for_task(self, task_id: Any, key: str = "") -> Any:
        return self.key_t(_place.get()) + super().get_key_for_task(task_id, key)


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
