"""Where a batch's result lives (worker.celery.shared.results): under the direct queue it was sent to, or Celery's
plain key for any other queue; the worker's backend picks the place from the message's routing key."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from worker.celery.shared.app import SHARED_QUEUE, direct_queue, make_app
from worker.celery.shared.results import PlacedResults, read_ready, result_key, result_place

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


class _Client:
    """MGET over a dict, the values appearing after `late` reads."""

    def __init__(self, values: dict[str, bytes], late: int = 0) -> None:
        self.values, self.late, self.asked = values, late, []

    def mget(self, keys: list[str]) -> list[bytes | None]:
        self.asked.append(keys)
        if len(self.asked) <= self.late:
            return [None] * len(keys)
        return [self.values.get(key) for key in keys]


def test_the_coordinator_reads_each_result_from_its_place_only() -> None:
    """A result is taken only from the key asked for it: one under the plain key for a direct-queue batch (as
    another worker would write it) is never seen, an unfinished one is not ready, a finished one is."""
    done = json.dumps({"status": "SUCCESS", "result": {"observations": "[]"}}).encode()
    keys = {"t1": result_key("t1", OWN), "t2": result_key("t2", OWN), "t3": result_key("t3", SHARED_QUEUE)}
    client = _Client(
        {
            "celery-task-meta-t1": done,  # t1 was sent to OWN: its plain key is nobody's answer
            keys["t2"]: json.dumps({"status": "STARTED"}).encode(),
            keys["t3"]: done,
        },
        late=2,
    )
    backend = SimpleNamespace(client=client, decode_result=json.loads)
    ready = read_ready(backend, keys, timeout=5.0, interval=0.0)  # type: ignore[arg-type]
    assert set(ready) == {"t3"} and len(client.asked) == 3
    assert client.asked[0] == [keys["t1"], keys["t2"], keys["t3"]]
    assert read_ready(SimpleNamespace(client=_Client({}), decode_result=json.loads), keys, 0.0, 0.0) == {}  # type: ignore[arg-type]
