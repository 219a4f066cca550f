"""Who runs what, without services: the coordinator's assignment of batches to enrolled workers, the
refusal of a result signed by any worker but the assigned one, and the Celery executor's routing."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate import __version__
from gate.core.suite.trial import FaultOrigin, Observation, Side
from gate.core.testing import make_specs
from gate.core.trust.assignment import Rotation, assign, reassign, shares
from gate.core.trust.enrolment import (
    EnrolledWorker,
    Refusal,
    ResultSignature,
    Roster,
    check_assigned,
    result_message,
    spec_digest,
)
from gate.io.keys import SigningKey
from worker.celery.coordinator.dealer import Dealer
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.app import SHARED_QUEUE, direct_queue
from worker.celery.shared.wire import decode_batch, encode_batch, encode_observations

NOW = datetime(2026, 3, 1, tzinfo=UTC)
PROPS = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=60)
WORKERS = st.lists(st.text("xyz0123456789", min_size=1, max_size=4), min_size=1, max_size=5, unique=True)


def enrolled(key: SigningKey, name: str) -> EnrolledWorker:
    return EnrolledWorker(name=name, key_id=key.key_id, public_key=key.public().pem().decode(), enrolled_at=NOW)


@given(WORKERS, st.lists(PROPS, min_size=1, max_size=4))
def test_every_batch_goes_to_one_worker_and_each_property_spreads_evenly(
    workers: list[str], waves: list[list[str]]
) -> None:
    """Over any waves each batch gets one of the workers, and a property's batch counts differ by one at most."""
    rotation = Rotation(tuple(workers))
    got: list[tuple[str, str]] = []
    for wave in waves:
        chosen, rotation = assign(rotation, wave)
        assert len(chosen) == len(wave) and set(chosen) <= set(workers)
        got.extend(zip(wave, chosen, strict=True))
    for prop in {p for p, _ in got}:
        counts = Counter(w for p, w in got if p == prop)
        assert max(counts[w] for w in workers) - min(counts[w] for w in workers) <= 1, (prop, counts)


def test_single_batch_properties_spread_and_one_worker_takes_all() -> None:
    """Properties of one batch each start one worker further on; with one worker every batch goes to it."""
    chosen, _ = assign(Rotation(("w1", "w2")), ["a", "b", "c", "d"])
    assert chosen == ("w1", "w2", "w1", "w2")
    chosen, _ = assign(Rotation(("only",)), ["a", "a", "b"])
    assert chosen == ("only", "only", "only")
    with pytest.raises(ValueError, match="at least one worker"):
        Rotation(())


def test_shares_count_trials_per_property_and_worker() -> None:
    """Each batch's size is counted under its property and worker."""
    assert shares(["a", "a", "b"], ["w1", "w2", "w1"], [3, 2, 5]) == {"a": {"w1": 3, "w2": 2}, "b": {"w1": 5}}


def test_only_the_assigned_key_counts() -> None:
    """The assigned worker's signature counts; another enrolled worker's is unassigned_signer naming both."""
    a, b = enrolled(SigningKey.generate(), "box-a"), enrolled(SigningKey.generate(), "box-b")
    roster = Roster(workers=(a, b))
    assert check_assigned(roster, a.key_id, a) == a
    assert check_assigned(roster, None, b) == b  # nothing assigned (no roster at send time): nothing to compare
    kind, detail = check_assigned(roster, a.key_id, b)  # type: ignore[misc]
    assert kind is Refusal.UNASSIGNED and "'box-b'" in detail and "'box-a'" in detail


class _Sent:
    def __init__(self, task_id: str) -> None:
        self.id = task_id


def routed_executor(names: tuple[str, ...], up: tuple[str, ...]) -> tuple[CeleryExecutor, dict, list]:
    """An executor enrolling `names` (`up` of them on the fleet with a direct queue), its sends recorded."""
    keys = {name: SigningKey.generate() for name in names}
    executor = CeleryExecutor("redis://127.0.0.1:9/0", batch_size=2)
    executor.assigner.roster = Roster(workers=tuple(enrolled(keys[n], n) for n in names))
    executor.control.on_queue = frozenset(direct_queue(keys[n].key_id) for n in up)
    sends: list[tuple[str, dict]] = []

    def send_task(name: str, *, args: list, kwargs: dict, queue: str, argsrepr: str) -> _Sent:
        sends.append((queue, args[0]))
        return _Sent(f"task-{len(sends)}")

    executor.app.send_task = send_task  # type: ignore[method-assign]
    executor.images.wait_hint = lambda run_id, image_id: {}  # type: ignore[method-assign]
    return executor, keys, sends


def test_the_executor_sends_every_batch_to_an_assigned_direct_queue() -> None:
    """With a roster, batches go round the enrolled workers that are up, never to the shared queue; the
    shares are what the card shows; without a roster they go to the shared queue as before."""
    executor, keys, sends = routed_executor(("box-a", "box-b", "box-c"), up=("box-a", "box-b"))
    assert executor.assigner.rotate(executor.control.on_queue, executor.queue) is None
    specs = make_specs(8, run_id="r1")
    executor._send(specs, 2)
    queues = Counter(queue for queue, _ in sends)
    assert queues == {direct_queue(keys["box-a"].key_id): 2, direct_queue(keys["box-b"].key_id): 2}
    assert executor.assigned("r1") == {specs[0].property_id: {"box-a": 4, "box-b": 4}}
    assert {executor.assigner.key(f"task-{n}") for n in range(1, 5)} == {keys[n].key_id for n in ("box-a", "box-b")}
    bare, _, plain = routed_executor(("box-a",), up=("box-a",))
    bare.assigner.roster = None
    assert bare.assigner.rotate(bare.control.on_queue, bare.queue) is None
    bare._send(specs, 2)
    assert {queue for queue, _ in plain} == {SHARED_QUEUE} and bare.assigned("r1") == {}


def test_no_enrolled_worker_up_is_a_harness_event_and_one_worker_is_said() -> None:
    """No enrolled worker's direct queue on the fleet: the run's trials cannot go anywhere (an event says
    why); one enrolled worker up: it takes every batch and the card's events say the row rests on it."""
    executor, _, _ = routed_executor(("box-a",), up=())
    assert executor.assigner.rotate(executor.control.on_queue, executor.queue) is not None
    assert [e.kind for e in executor.events] == ["no_enrolled_worker"]
    executor, keys, sends = routed_executor(("box-a", "box-b"), up=("box-b",))
    executor.assigner.rotate(executor.control.on_queue, executor.queue)
    executor._send(make_specs(4, run_id="r1"), 1)
    assert {queue for queue, _ in sends} == {direct_queue(keys["box-b"].key_id)}
    assert [(e.kind, e.property_id) for e in executor.events] == [("one_worker", "p")]


def test_a_validly_signed_result_from_another_enrolled_worker_is_refused() -> None:
    """Adversarial: box-b takes a batch assigned to box-a off its queue and signs its answer with its own
    enrolled key; the signature verifies, but every trial is a fault of unknown origin, and the event names both."""
    executor, keys, sends = routed_executor(("box-a", "box-b"), up=("box-a",))
    executor.assigner.rotate(executor.control.on_queue, executor.queue)
    specs = make_specs(2, run_id="r1")
    sent = executor._send(specs, 1)
    (task_id,) = sent
    payload = sends[0][1]
    assert executor.answers.issued[task_id] == spec_digest(payload)
    observations = encode_observations([])
    for name, counted in (("box-b", False), ("box-a", True)):
        executor.events.clear()
        signature = sign_with(keys[name], task_id, payload, observations)
        result = {"observations": observations, "worker": name, "signature": signature, "version": __version__}
        out = list(executor.answered(task_id, sent[task_id], {"status": "SUCCESS", "result": result}))
        if counted:
            assert out == [] and executor.events == []  # no observations sent back, none refused
        else:
            assert [o.fault_origin for o in out] == [FaultOrigin.UNKNOWN] * 2
            assert all("unassigned_signer" in (o.fault or "") for o in out)
            (event,) = executor.events
            assert event.kind == "unassigned_signer" and "'box-b'" in event.detail and "'box-a'" in event.detail


def sign_with(key: SigningKey, task_id: str, payload: dict, observations: str) -> dict:
    """The signature a worker holding `key` attaches (worker.celery.worker.signing.sign_result, with this key)."""
    digest = spec_digest(payload)
    signature = key.sign(result_message(task_id, digest, observations)).hex()
    return ResultSignature(key_id=key.key_id, batch_id=task_id, spec_digest=digest, signature=signature).model_dump()


def test_encode_batch_is_what_was_sent() -> None:
    """The payload recorded by the test double is the wire encoding (so its digest is the issued one)."""
    executor, _, sends = routed_executor(("box-a",), up=("box-a",))
    executor.assigner.rotate(executor.control.on_queue, executor.queue)
    specs = make_specs(2, run_id="r1")
    executor._send(specs, 1)
    assert sends[0][1] == encode_batch(specs)


def test_reassign_tries_each_other_worker_once() -> None:
    """A lost batch goes to the first worker of the round not tried yet; none left: None."""
    rotation = Rotation(("w1", "w2", "w3"))
    assert reassign(rotation, frozenset({"w1"})) == "w2"
    assert reassign(rotation, frozenset({"w2", "w1"})) == "w3"
    assert reassign(rotation, frozenset({"w1", "w2", "w3"})) is None


def gather_where(executor: CeleryExecutor, silent: set[str]):
    """A stand-in for `Gathering.gather`: batches assigned to a key in `silent` never report (they stay in
    flight and end as harness faults, as gathering ends them); the others answer with a clean exit."""

    def gather(sent: dict, timeout: float, outbox: object):
        for task, batch in sent.items():
            if executor.assigner.key(task) in silent:
                yield from (Observation.harness_fault(s, "no result", origin=FaultOrigin.HARNESS) for s in batch)
            else:
                executor.gathering.drop(task)
                yield from (Observation.of(s, exit_code=0) for s in batch)

    return gather


def test_a_batch_whose_worker_never_answers_goes_to_another_enrolled_worker() -> None:
    """The assigned worker is silent: its batch goes to the other enrolled worker's direct queue, the card's
    share moves with it and a batch_reassigned event names both; the trials come back clean."""
    executor, keys, sends = routed_executor(("box-a", "box-b"), up=("box-a", "box-b"))
    executor.assigner.rotate(executor.control.on_queue, executor.queue)
    sent = executor._send(make_specs(2, run_id="r1"), 1)
    executor.gathering.gather = gather_where(executor, {keys["box-a"].key_id})  # type: ignore[method-assign]
    out = list(executor._gather_assigned(sent, 5.0))
    assert [(o.fault, o.exit_code) for o in out] == [(None, 0), (None, 0)]
    assert [queue for queue, _ in sends] == [direct_queue(keys["box-a"].key_id), direct_queue(keys["box-b"].key_id)]
    assert executor.assigned("r1") == {"p": {"box-b": 2}}
    (event,) = executor.events
    assert event.kind == "batch_reassigned" and "'box-a'" in event.detail and "'box-b'" in event.detail


def test_a_batch_no_worker_answers_ends_as_faults_after_each_was_tried_once() -> None:
    """Every enrolled worker silent: the batch goes to each once, never round again, and ends as harness faults."""
    executor, keys, sends = routed_executor(("box-a", "box-b"), up=("box-a", "box-b"))
    executor.assigner.rotate(executor.control.on_queue, executor.queue)
    sent = executor._send(make_specs(2, run_id="r1"), 1)
    executor.gathering.gather = gather_where(executor, {k.key_id for k in keys.values()})  # type: ignore[method-assign]
    out = list(executor._gather_assigned(sent, 5.0))
    assert [o.fault_origin for o in out] == [FaultOrigin.HARNESS] * 2
    assert len(sends) == 2 and [e.kind for e in executor.events] == ["batch_reassigned"]


def test_both_sides_of_a_pair_go_to_the_same_worker_and_pairs_go_round() -> None:
    """A paired wave (base and patch trial of each index, interleaved): the base batch and the patch batch of
    the same indices go to one enrolled worker's direct queue, and the pairs' batches spread over the workers."""
    executor, keys, sends = routed_executor(("box-a", "box-b", "box-c"), up=("box-a", "box-b", "box-c"))
    executor.assigner.rotate(executor.control.on_queue, executor.queue)
    base = make_specs(8, run_id="r1", tree_digest="base-tree", side=Side.BASE)
    patch = make_specs(8, run_id="r1", tree_digest="patch-tree")
    executor._send([spec for pair in zip(base, patch, strict=True) for spec in pair], 3)
    where: dict[tuple[Side, int], str] = {}
    for queue, payload in sends:
        for spec in decode_batch(payload):
            where[spec.side, spec.trial_index] = queue
    # Batches of 2: four turns of 2 indices (both sides) go round three workers, the first twice; each worker has
    # room for one turn, so the fourth waits until box-a answered its first. The shares count the row's trials
    # (the patch side), as its `workers` do.
    assert len(sends) == 6 and set(where.values()) == {direct_queue(k.key_id) for k in keys.values()}
    assert executor.more() == {}
    for task in [task for task in executor.dealer._out if executor.assigner.key(task) == keys["box-a"].key_id]:
        executor.dealer.done(task)  # box-a answered its pair's two batches
    executor.more()
    for queue, payload in sends[6:]:
        for spec in decode_batch(payload):
            where[spec.side, spec.trial_index] = queue
    assert len(where) == 16 and all(where[Side.BASE, i] == where[Side.PATCH, i] for i in range(8))
    assert {queue for queue, _ in sends[6:]} == {direct_queue(keys["box-a"].key_id)}
    assert sorted(executor.assigned("r1")["p"].values()) == [2, 2, 4]


def test_an_owned_worker_has_two_places_in_the_round() -> None:
    """Beside one stranger an owned worker is assigned two batches of a row for each of the stranger's, and
    single-batch properties still go round every place."""
    rotation = Rotation(("own", "stranger"), owned=frozenset({"own"}))
    assert rotation.places == ("own", "stranger", "own")
    chosen, rotation = assign(rotation, ["row"] * 9)
    assert Counter(chosen) == {"own": 6, "stranger": 3}
    singles, _ = assign(rotation, ["a", "b", "c"])
    assert Counter(singles) == {"own": 2, "stranger": 1}
    assert Rotation(("a", "b")).places == ("a", "b")


def test_room_zero_sends_a_whole_wave_at_once_round_the_workers_and_copies_nothing() -> None:
    """`gate run --room 0`: every batch of the wave goes out at once, to the worker the round gives it, and an
    idle worker is never sent a straggler's copy."""
    executor, keys, sends = routed_executor(("box-a", "box-b"), up=("box-a", "box-b"))
    executor.dealer = Dealer(executor.events, per_process=0)
    executor.assigner.rotate(executor.control.on_queue, executor.queue)
    executor._send(make_specs(12, run_id="r1"), 1)
    assert Counter(queue for queue, _ in sends) == {direct_queue(k.key_id): 3 for k in keys.values()}
    executor.dealer._took.append(0.0)
    assert executor.dealer.copies(frozenset()) == [] and executor.more() == {}
