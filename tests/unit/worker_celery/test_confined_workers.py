"""A worker under its own ACL user (worker.celery.coordinator.acl): it finds it may not read the shared queue
(worker.celery.worker.confinement), and the coordinator counts it on the shared queue when a roster is in force."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from gate.core.errors import BrokerError
from gate.core.trust.enrolment import Roster
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.app import SHARED_QUEUE, direct_queue
from worker.celery.worker import confinement

OWN = direct_queue("ef" * 32)


class _Redis:
    """A client whose LLEN answers with the given outcomes in turn (an exception is raised)."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)

    def llen(self, queue: str) -> int:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ((0,), False),
        ((redis.exceptions.NoPermissionError("NOPERM"),), True),
        ((redis.exceptions.ConnectionError("refused"), 3), False),  # waited for, then asked again
    ],
)
def test_a_worker_finds_out_whether_it_is_confined(
    outcomes: tuple[Any, ...], expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NOPERM on the shared queue means a worker's own user; an answer means a user that may read it."""
    monkeypatch.setattr(confinement.redis.Redis, "from_url", lambda *a, **k: _Redis(*outcomes))
    monkeypatch.setattr(confinement.time, "sleep", lambda s: None)
    notes: list[str] = []
    assert confinement.confined("redis://u:p@h/0", SHARED_QUEUE, note=notes.append) is expected
    assert len(notes) == (1 if len(outcomes) > 1 else 0)


def test_refused_credentials_stop_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A revoked worker's user is gone: its start fails with one line instead of waiting forever."""
    refused = redis.exceptions.AuthenticationError("WRONGPASS invalid username-password pair")
    monkeypatch.setattr(confinement.redis.Redis, "from_url", lambda *a, **k: _Redis(refused))
    with pytest.raises(BrokerError, match="refused this worker's credentials"):
        confinement.confined("redis://u:p@h/0", SHARED_QUEUE)


def test_a_confined_worker_serves_the_shared_queue_only_with_a_roster() -> None:
    """A worker consuming its direct queue alone is on the shared queue of an enrolled run; never on an
    unenrolled run's (it would not take from it) nor on a pinned fleet's."""
    confined = [{"name": OWN}]
    everything = [{"name": SHARED_QUEUE}, {"name": "probegate.image"}, {"name": OWN}]
    enrolled = CeleryExecutor("redis://127.0.0.1:1/0", enrolled=lambda: Roster(workers=()))
    assert enrolled.control.serves(confined) and enrolled.control.serves(everything)
    assert not enrolled.control.serves([]) and not enrolled.control.serves([{"name": "probegate.image"}])
    open_run = CeleryExecutor("redis://127.0.0.1:1/0")
    assert open_run.control.serves(everything) and not open_run.control.serves(confined)
    pinned = CeleryExecutor("redis://127.0.0.1:1/0", queue="probegate.fleet", enrolled=lambda: Roster(workers=()))
    assert not pinned.control.serves(confined) and pinned.control.serves([{"name": "probegate.fleet"}, {"name": OWN}])
