"""Vanished workers on the coordinator's side: a worker whose heartbeat lapsed is presumed gone after
`gone_after_s` (never sooner, and not for a gap in the coordinator's own looks), and its batches in flight go to
another enrolled worker within the gather loop instead of after the result timeout; an answer it sends after
all counts nowhere. The broker is faked (no Redis); the signatures and the roster are real."""

from __future__ import annotations

from typing import Any

import pytest

from gate import __version__
from gate.core.errors import BrokerError
from gate.core.suite.trial import FaultOrigin, Observation
from gate.core.testing import make_specs
from unit.core.trust.test_assignment import routed_executor, sign_with
from worker.celery.coordinator import gathering
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.coordinator.liveness import Liveness
from worker.celery.shared.app import direct_queue
from worker.celery.shared.wire import encode_batch, encode_observations


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_worker_is_presumed_gone_only_after_its_allowance_and_is_back_when_seen() -> None:
    """Watched at t=0 and never seen: not gone at 10 s, gone after; seen again: up again at once."""
    clock, beating = Clock(), set()
    live = Liveness(lambda keys: beating & set(keys), 10.0, clock=clock)
    live.watch(["a", "b"])
    beating.add("b")
    for _ in range(10):
        clock.now += 1.0
        assert live.look() == frozenset()
    clock.now += 1.0
    assert live.look() == frozenset({"a"}) and live.unseen_s("a") == pytest.approx(11.0)
    beating.add("a")
    clock.now += 1.0
    assert live.look() == frozenset()


def test_a_gap_in_the_looks_or_an_unreachable_broker_is_no_evidence() -> None:
    """A look after a long pause (an outage, the time between waves) gives every worker a fresh allowance, an
    unreadable broker leaves the last look standing, and `gone_after_s` None never presumes anyone gone."""
    clock = Clock()
    live = Liveness(lambda keys: set(), 10.0, clock=clock)
    live.watch(["a"])
    clock.now += 4.0
    assert live.look() == frozenset()
    clock.now += 60.0  # nobody looked for a minute
    assert live.look() == frozenset()
    for _ in range(11):
        clock.now += 1.0
        gone = live.look()
    assert gone == frozenset({"a"})

    def down(keys: Any) -> set[str]:
        raise BrokerError("reading heartbeats: Connection refused")

    live.read = down
    clock.now += 1.0
    assert live.look() == frozenset({"a"})
    never = Liveness(lambda keys: set(), None, clock=clock)
    never.watch(["a"])
    clock.now += 3600.0
    assert never.look() == frozenset()


class Results:
    """The result keys as the gather loop reads them: task id -> meta, filled in by the test."""

    def __init__(self) -> None:
        self.meta: dict[str, dict[str, Any]] = {}

    def ready(self, backend: Any, keys: dict[str, str], timeout: float, interval: float) -> dict[str, Any]:
        return {task: self.meta[task] for task in keys if task in self.meta}


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch) -> Results:
    found = Results()
    monkeypatch.setattr(gathering, "read_ready", found.ready)
    monkeypatch.setattr(gathering, "EPOCH_CHECK_S", 0.0)
    monkeypatch.setattr(gathering.Gathering, "restarted", lambda self, strict=False: None)
    return found


def vanishing(names: tuple[str, ...]) -> tuple[CeleryExecutor, dict, list, Clock, set[str]]:
    """An executor over `names`, all up, with a controlled clock and the set of key ids beating."""
    executor, keys, sends = routed_executor(names, up=names)
    executor.result_timeout_s = 3.0  # real seconds: without the heartbeats, the old way ends these tests quickly
    executor.assigner.rotate(executor.control.on_queue, executor.queue)
    clock, beating = Clock(), {k.key_id for k in keys.values()}
    executor.liveness = Liveness(lambda asked: beating & set(asked), 10.0, clock=clock)
    executor.liveness.watch(executor.assigner.workers)  # as `run` does once the round is set
    return executor, keys, sends, clock, beating


def answer(results: Results, keys: dict, name: str, task: str, batch: list, worker: str | None = None) -> None:
    """Worker `name` answers `task` with a clean exit for every trial, signed with its key."""
    observations = encode_observations([Observation.of(s, exit_code=0, worker_id=worker or name) for s in batch])
    signature = sign_with(keys[name], task, encode_batch(batch), observations)
    result = {"observations": observations, "worker": worker or name, "signature": signature, "version": __version__}
    results.meta[task] = {"status": "SUCCESS", "result": result}


def drive(executor: CeleryExecutor, sent: dict, clock: Clock, step) -> list[Observation]:
    """Gather `sent`, advancing the clock one second per look and calling `step(sends)` before each read."""
    out: list[Observation] = []
    original = executor.liveness.look

    def look() -> frozenset[str]:
        clock.now += 1.0
        step()
        return original()

    executor.liveness.look = look  # type: ignore[method-assign]
    out.extend(executor._gather_assigned(sent, 3.0))  # real seconds: the looks take microseconds
    return out


def test_the_moved_batch_counts_once_and_the_late_answer_is_an_event(results: Results) -> None:
    """box-a vanishes with its batch: within its allowance plus one look the batch is on box-b's queue, box-b's
    answer is the one counted (once per trial), the share is box-b's, and box-a's answer after that is an
    event only; the run never waits for the result timeout."""
    executor, keys, sends, clock, beating = vanishing(("box-a", "box-b"))
    specs = make_specs(2, run_id="r1")
    sent = executor._send(specs, 1)
    (first,) = sent
    beating.discard(keys["box-a"].key_id)
    looks = []

    def step() -> None:
        looks.append(clock.now)
        if len(sends) == 2 and first not in results.meta:
            answer(results, keys, "box-a", first, specs)  # box-a comes back and answers, after the move
        elif first in results.meta and "task-2" not in results.meta:
            answer(results, keys, "box-b", "task-2", specs)

    out = drive(executor, sent, clock, step)
    assert [(o.trial_index, o.fault, o.worker_id) for o in out] == [(0, None, "box-b"), (1, None, "box-b")]
    assert sends[1][0] == direct_queue(keys["box-b"].key_id) and 10 < len(looks) <= 14
    assert executor.assigned("r1") == {"p": {"box-b": 2}}
    assert [e.kind for e in executor.events] == ["worker_gone", "batch_reassigned", "late_answer"]
    assert "'box-a'" in executor.events[0].detail and first in executor.events[2].detail


def test_a_cross_check_whose_worker_vanished_never_goes_to_the_worker_it_checks(results: Results) -> None:
    """Adversarial: a cross-check of box-a's trials sent to box-b, and box-b vanishes; the copy goes to box-c,
    never back to box-a (whose word it checks), and no row's share moves."""
    executor, keys, sends, clock, beating = vanishing(("box-a", "box-b", "box-c"))
    specs = make_specs(2, run_id="r1")
    sent = executor._send(specs, 1)
    executor.gathering.drop(next(iter(sent)))
    shares = executor.assigned("r1")
    executor.answers.key_of = lambda worker: keys[worker].key_id  # type: ignore[method-assign]
    executor.control._direct = tuple(direct_queue(k.key_id) for k in keys.values())
    check = executor._send(specs, 1, queue=direct_queue(keys["box-b"].key_id))
    executor.assigner.avoid(check, {keys["box-a"].key_id})
    beating.discard(keys["box-b"].key_id)

    def step() -> None:
        if len(sends) == 3 and "task-3" not in results.meta:
            answer(results, keys, "box-c", "task-3", specs)

    out = drive(executor, check, clock, step)
    assert sends[2][0] == direct_queue(keys["box-c"].key_id)
    assert [(o.fault, o.worker_id) for o in out] == [(None, "box-c")] * 2
    assert executor.assigned("r1") == shares


def test_with_every_other_worker_gone_the_batch_ends_as_harness_faults(results: Results) -> None:
    """box-a vanishes and box-b has vanished too: nobody can take the batch, whose trials end as harness faults
    once it has waited STRANDED_S for box-a to come back (never passes, never a wait for the result timeout)."""
    executor, _, sends, clock, beating = vanishing(("box-a", "box-b"))
    sent = executor._send(make_specs(2, run_id="r1"), 1)
    beating.clear()
    out = drive(executor, sent, clock, lambda: None)
    assert [o.fault_origin for o in out] == [FaultOrigin.HARNESS] * 2 and len(sends) == 1
    assert all("presumed gone" in (o.fault or "") for o in out)


def test_a_worker_beating_under_a_new_boot_id_restarted_and_is_said_once() -> None:
    """A heartbeat naming another boot id than before means the worker restarted (and lost what it held): said
    once; a first boot id, the same one again, or a beat that names none says nothing."""
    clock, boots = Clock(), {"a": "one", "b": ""}
    live = Liveness(lambda keys: {k: boots[k] for k in keys if k in boots}, 10.0, clock=clock)
    live.watch(["a", "b"])
    clock.now += 1.0
    live.look()
    assert live.rebooted() == frozenset()
    boots.update(a="two", b="x")
    clock.now += 1.0
    assert live.look() == frozenset() and live.rebooted() == frozenset({"a"})
    clock.now += 1.0
    live.look()
    assert live.rebooted() == frozenset()


def test_a_worker_that_restarted_is_sent_again_the_batches_it_lost(results: Results) -> None:
    """box-a's heartbeat names a new boot id (it restarted, and took its batches without acknowledgements): the
    batch it held goes to it again under a new id, that answer counts, and the card says `worker_restarted`."""
    executor, keys, sends, clock, _ = vanishing(("box-a",))
    boots = {keys["box-a"].key_id: "one"}
    executor.liveness = Liveness(lambda asked: {k: boots[k] for k in asked if k in boots}, 10.0, clock=clock)
    executor.liveness.watch(executor.assigner.workers)
    specs = make_specs(2, run_id="r1")
    sent = executor._send(specs, 1)

    def step() -> None:
        if len(looks) == 2:
            boots[keys["box-a"].key_id] = "two"
        if len(sends) == 2 and "task-2" not in results.meta:
            answer(results, keys, "box-a", "task-2", specs)
        looks.append(clock.now)

    looks: list[float] = []
    out = drive(executor, sent, clock, step)
    assert [(o.fault, o.worker_id) for o in out] == [(None, "box-a")] * 2
    assert sends[1][0] == sends[0][0] and executor.assigned("r1") == {"p": {"box-a": 2}}
    assert [e.kind for e in executor.events] == ["one_worker", "worker_restarted"], executor.events
