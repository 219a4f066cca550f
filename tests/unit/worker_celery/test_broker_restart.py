"""The Celery executor's gather loop across a broker restart, with the broker, the result backend and
the publishing faked (no Redis): an outage is waited out and said on stderr, a restart (the server's run
id changed) sends every unanswered batch again with the tree and the image, and an outage longer than
`broker_wait_s` ends the batches as harness faults."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import redis.exceptions

from gate import __version__
from gate.core.suite.trial import Observation, TrialSpec
from gate.core.testing import make_specs
from worker.celery.coordinator import dispatch, gathering
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.wire import decode_batch, encode_observations


class Sent:
    def __init__(self, task_id: str) -> None:
        self.id = task_id


class Inputs:
    snapshot, tree_digest, fixtures = None, "t", {}

    def trees(self) -> dict[str, None]:
        return {self.tree_digest: self.snapshot}


class Broker:
    """The broker as the executor sees it: a run id, batches sent, results read. `down` reads of results
    fail; `lose` makes the next read find the server restarted with nothing of what was sent."""

    def __init__(self) -> None:
        self.run_id = "first"
        self.down = 0
        self.alive: dict[str, list[TrialSpec]] = {}  # task id -> batch, for batches the server still holds
        self.sent: list[str] = []
        self.ids = (f"task-{n}" for n in itertools.count())

    def info(self, section: str) -> dict[str, str]:
        if self.down:
            raise redis.exceptions.ConnectionError("Connection refused")
        return {"run_id": self.run_id}

    def ready(self, backend: Any, keys: dict[str, str], timeout: float, interval: float) -> dict[str, dict[str, Any]]:
        ids = set(keys)
        if self.down:
            self.down -= 1
            if self.down == 0 and self.lose:
                self.run_id, self.alive = "second", {}  # back, empty
            raise redis.exceptions.ConnectionError("Connection refused")
        arrived = {}
        for task in sorted(ids & set(self.alive)):
            batch = self.alive.pop(task)
            observations = [Observation.of(s, exit_code=0, worker_id="w1") for s in batch]
            result = {"observations": encode_observations(observations), "version": __version__}
            arrived[task] = {"status": "SUCCESS", "result": result}
        return arrived

    lose = False


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Broker:
    fake = Broker()
    monkeypatch.setattr(dispatch, "upload", lambda *args: fake.sent.append("upload"))
    monkeypatch.setattr(gathering.time, "sleep", lambda s: None)
    monkeypatch.setattr(gathering.redis.Redis, "from_url", lambda *a, **k: fake)
    monkeypatch.setattr(gathering, "read_ready", fake.ready)
    return fake


def executor(broker: Broker, notes: list[str], *, wait_s: float = 120.0) -> CeleryExecutor:
    ex = CeleryExecutor("redis://127.0.0.1:1/0", broker_wait_s=wait_s, note=notes.append)
    ex.images.republish = lambda run, image: broker.sent.append(f"image {image}")  # type: ignore[method-assign]
    ex.images.wait_hint = lambda run_id, image_id: {}  # type: ignore[method-assign]

    def send_task(name: str, *, args: list, kwargs: dict, queue: str, argsrepr: str) -> Sent:
        task = next(broker.ids)
        broker.alive[task] = decode_batch(args[0])
        broker.sent.append(task)
        return Sent(task)

    ex.app.send_task = send_task  # type: ignore[method-assign]
    return ex


def gather(
    ex: CeleryExecutor, broker: Broker, batches: list[list[TrialSpec]], *, down: int, lose: bool = False
) -> list[Observation]:
    """Send the batches as `run` does, then take the broker down for `down` reads (and lose what it held)."""
    ex.gathering.restarted()  # `run` notes the server's run id before it sends
    sent = {ex._send_batch(batch, "q", None, primary=True): batch for batch in batches}
    broker.down, broker.lose = down, lose
    ex._inputs = Inputs()  # type: ignore[assignment]  # what `run` keeps for a restart
    return list(ex.gathering.gather(sent, 600.0, ex))


def test_an_outage_is_waited_out_and_said(broker: Broker) -> None:
    """The broker unreachable for a while, then back with everything: stderr says so, every trial arrives."""
    notes: list[str] = []
    ex = executor(broker, notes)
    batches = [make_specs(3, image_id="sha256:i"), make_specs(2, first=3, image_id="sha256:i")]
    got = gather(ex, broker, batches, down=3)
    assert sorted(o.trial_index for o in got) == [0, 1, 2, 3, 4] and all(o.fault is None for o in got)
    assert "waiting up to 120s" in notes[0] and "the broker is back" in notes[1] and len(notes) == 2
    assert [e.kind for e in ex.events] == ["broker_unreachable"]


def test_a_restart_sends_the_tree_the_image_and_every_unanswered_batch_again(broker: Broker) -> None:
    """Back with a new run id and nothing it held: the tree is uploaded, the image published and both
    batches sent again under new ids; their results count, and the card's events say what happened."""
    notes: list[str] = []
    ex = executor(broker, notes)
    batches = [make_specs(3, image_id="sha256:i"), make_specs(2, first=3, image_id="sha256:i")]
    got = gather(ex, broker, batches, down=2, lose=True)
    assert sorted(o.trial_index for o in got) == [0, 1, 2, 3, 4] and all(o.fault is None for o in got)
    assert broker.sent == ["task-0", "task-1", "upload", "image sha256:i", "task-2", "task-3"]
    assert any("sending 2 batch(es) again" in note for note in notes)
    assert [e.kind for e in ex.events] == ["broker_unreachable", "broker_restarted"]


def test_an_outage_longer_than_the_wait_ends_as_harness_faults(broker: Broker) -> None:
    """A broker that stays away past `broker_wait_s`: the batches' trials are harness faults, never passes."""
    notes: list[str] = []
    ex = executor(broker, notes, wait_s=0.0)
    got = gather(ex, broker, [make_specs(2)], down=10**6)
    assert len(got) == 2 and all(o.fault and o.fault_origin == "harness" for o in got)
    assert "waiting up to 0s" in notes[0]
