"""Where a batch's result lives (worker.celery.results): under the direct queue it was sent to, or Celery's
plain key for any other queue; the worker's backend picks the place from the message's routing key."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from worker.celery.app import SHARED_QUEUE, direct_queue, make_app
from worker.celery.results import PlacedResults, result_key, result_place

OWN = direct_queue("cd" * 32)


def test_a_direct_queue_has_its_own_place() -> None:
    """A direct queue's results live under its name; the shared queue's, and any odd name's, under the plain key."""
    assert result_key("t1", OWN) == f"{OWN}.results.celery-task-meta-t1"
    assert result_key("t1", SHARED_QUEUE) == "celery-task-meta-t1"
    assert result_key("t1", None) == "celery-task-meta-t1"
    assert result_place("probegate.direct.x y*") == ""  # never a pattern or a space into a key name


@pytest.mark.parametrize(
    ("routing_key", "key"),
    [(OWN, f"{OWN}.results.celery-task-meta-t1"), (SHARED_QUEUE, "celery-task-meta-t1"), (None, "celery-task-meta-t1")],
)
def test_the_worker_stores_under_the_queue_the_batch_came_through(
    routing_key: str | None, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's backend writes a result where the coordinator will read it: the place of the routing key."""
    backend = make_app("redis://127.0.0.1:1/0").backend
    assert isinstance(backend, PlacedResults)
    stored: list[str] = []

    def store(task_id: str, *args: Any, **kwargs: Any) -> None:
        stored.append(backend.get_key_for_task(task_id).decode())

    monkeypatch.setattr(backend, "_store_result", store)
    request = SimpleNamespace(delivery_info={"routing_key": routing_key, "exchange": routing_key})
    backend.store_result("t1", {"observations": "[]"}, "SUCCESS", request=request)
    assert stored == [key]
    assert backend.get_key_for_task("t1") == b"celery-task-meta-t1"  # the place lasts for that store only
