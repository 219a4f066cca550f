"""The Celery executor: the coordinator's side of running trials on many machines.

Same interface as the local pool (`run(specs, inputs)` yields observations), so nothing above
the executor knows which one ran. Inputs are uploaded by content first. The run's image is
published once, in the background from `open` on (see worker.celery.imagepublish), so any worker
can fetch what it lacks; batches go at once to the shared queue (or a pinned one), and a worker
that holds the image runs them without waiting for that. Results are folded as they arrive. A
batch that never reports (worker gone, broker restarted without persistence) turns into harness
faults after the result timeout: the run ends as harness_error, never as a false pass. Workers
keep a run's containers warm between its batches; `close` broadcasts that the run is over so
every worker removes them at once.

With a worker registry (`enrolled`), every result must be signed by an enrolled, unrevoked key over
the batch id and spec digest this coordinator issued (gate.core.trust.enrolment): anything else is a
harness event and harness faults for its trials, never an observation; an accepted observation
carries the enrolled name as its worker id, whatever the worker wrote. The coordinator also decides who
runs what: each batch goes to the direct queue of an enrolled worker it chose (gate.core.trust.assignment),
never to the shared queue, and a result counts only when signed by the key of the worker it was sent to.
Each batch's result is read from the place of the queue it was sent to (worker.celery.results): under a
worker's direct queue, where no other worker's broker user may write.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import redis

from gate.core.card.card import HarnessEvent
from gate.core.errors import BrokerError, GateError
from gate.core.suite.batching import batches
from gate.core.suite.trial import FaultOrigin, Limits, Observation, TrialSpec
from gate.core.trust.assignment import Rotation, assign, reassign
from gate.core.trust.enrolment import EnrolledWorker, Refusal, Roster, check_assigned, check_result, spec_digest
from gate.io.snapshot import LocalInputs
from gate.io.workers import verify_pem
from worker.celery.app import (
    CONTROL_CLOSE_RUN,
    DIRECT_PREFIX,
    SHARED_QUEUE,
    STOP_SIGNAL,
    TASK_RUN_BATCH,
    VISIBILITY_TIMEOUT_S,
    direct_queue,
    make_app,
)
from worker.celery.blobs import BlobStore, RedisBlobStore, upload
from worker.celery.broker import broker_call
from worker.celery.imagepublish import RunImages
from worker.celery.results import read_ready, result_key
from worker.celery.wire import decode_observations, encode_batch
from worker.host.engine import DEFAULT_IMAGE

MAX_BATCH = 1000
ABORT_WAIT_S = 2.0  # the most `abort` waits on the broker: Ctrl-C must stop the run within seconds
CLOSE_WAIT_S = 3.0  # the most `close` waits for its broadcast to be published (kombu retries for longer)
# A control message is dropped by a worker whose clock is past its expiry: allow for skewed clocks.
CLOSE_EXPIRES_S = 300.0
PUBLISH_WAIT_S = 300.0  # the most a worker lacking the run's image waits for its publication in flight
BROKER_WAIT_S = 120.0  # the most a run waits for an unreachable broker to come back
EPOCH_CHECK_S = 1.0  # how often a gathering run asks whether the broker restarted (and lost what it held)


class CeleryExecutor:
    """Dispatches trial batches to `gate-worker serve` processes over Redis. `queue` pins batches to
    a fleet started with `--queue` (default: the shared queue every worker consumes); `registry`
    (host[:port]) carries the run's image instead of the blob store; `enrolled` (the worker registry,
    read at each run) makes signed results from enrolled workers the only ones taken."""

    def __init__(
        self,
        broker: str,
        *,
        image: str = DEFAULT_IMAGE,
        queue: str | None = None,
        registry: str | None = None,
        compress_images: bool = True,
        blobs: BlobStore | None = None,
        worker_wait_s: float = 30.0,
        result_timeout_s: float | None = None,
        visibility_timeout_s: float = VISIBILITY_TIMEOUT_S,
        batch_size: int | None = None,
        poll_s: float = 0.02,
        enrolled: Callable[[], Roster] | None = None,
        broker_wait_s: float = BROKER_WAIT_S,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.app = make_app(broker, visibility_timeout_s=visibility_timeout_s)
        # Asked for the server's run id: a Redis that restarted without persistence has a new one.
        self._probe = redis.Redis.from_url(broker, socket_timeout=2.0, socket_connect_timeout=2.0)
        self._epoch: str | None = None
        self.broker_wait_s = broker_wait_s
        self.note = note or _to_stderr
        self.blobs = blobs or RedisBlobStore(broker)
        self.image = image
        self.queue = queue or SHARED_QUEUE
        self.worker_wait_s = worker_wait_s
        self.result_timeout_s = result_timeout_s
        self.visibility_timeout_s = visibility_timeout_s
        self.batch_size = batch_size
        self.poll_s = poll_s
        self.events: list[HarnessEvent] = []
        self._processes = 0
        self._dispatched: set[str] = set()  # runs with batches sent: only those have containers to close
        self._runs_of: dict[str, str] = {}  # task id -> run id, for batches not yet answered (abort revokes them)
        self._queue_of: dict[str, str] = {}  # task id -> the queue it went to (sent again there after a restart)
        self._inputs: LocalInputs | None = None  # the run's inputs, uploaded again after a broker restart
        self.enrolled = enrolled
        self._roster: Roster | None = None
        self._issued: dict[str, str] = {}  # every batch id this coordinator sent -> digest of the spec it sent
        self._direct: tuple[str, ...] | None = None  # every worker's own queue, asked once (cross-checks)
        # worker id on an observation -> the key that signed it (enrolled and verified when a roster is in
        # force): a cross-check avoids the queue of the key that produced the result, whatever it calls itself.
        self._keys: dict[str, str] = {}
        self._uploaded: set[str] = set()  # trees `run` uploaded: a cross-check of their trials needs no upload
        # With a roster: the direct queues of the workers on our queue (asked with `discover`), the round the
        # coordinator assigns batches in, and every batch id sent to a direct queue -> the key meant to answer.
        self._fleet: frozenset[str] = frozenset()
        self._rotation: Rotation | None = None
        self._assigned: dict[str, str] = {}
        self._assignments: dict[str, dict[str, dict[str, int]]] = {}  # run id -> property -> worker name -> trials
        self._lone: set[tuple[str, str]] = set()  # (run id, property) already said to rest on one worker
        # A worker waits at most a quarter of the visibility timeout: its batch must still finish inside it.
        wait_s = min(PUBLISH_WAIT_S, visibility_timeout_s / 4)
        self.images = RunImages(
            image, self.blobs, self.events, registry=registry, compress=compress_images, wait_s=wait_s
        )

    def image_id(self) -> str:
        """The image's ID on this machine's engine (see RunImages.image_id): every batch names it."""
        return self.images.image_id()

    def open(self, run_id: str, limits: Limits) -> None:
        """Start publishing the run's image while the coordinator seals and plans. Containers are not
        started ahead: each worker process opens the run on its first batch of it, a control command
        only reaches a worker's main process, nor is it known which processes will get the batches."""
        with contextlib.suppress(GateError):  # the run's own image_id() call reports it
            if image_id := self.image_id():
                self.images.start(run_id, image_id)

    def close(self, run_id: str) -> None:
        """Let the run's image publication finish (it serves the next runs too; at most
        a worker's wait), then tell every worker to remove the run's containers now rather than after
        its idle timeout. Never raises and waits at most CLOSE_WAIT_S for that broadcast: a broker
        outage must not change the verdict."""
        self.images.finish(run_id)
        self._end_run(run_id, CLOSE_WAIT_S)

    def abort(self, run_id: str) -> None:
        """Stop the run now: batches not started are revoked, running ones are stopped in their worker
        process (which removes its containers, worker.celery.tasks), and every worker removes the run's
        containers. Waits for no publication and at most ABORT_WAIT_S for the broker."""
        tasks = [task for task, run in self._runs_of.items() if run == run_id]
        for task in tasks:
            del self._runs_of[task]

        def revoke() -> None:
            with contextlib.suppress(BrokerError), broker_call("revoking the run's batches"):
                self.app.control.revoke(tasks, terminate=True, signal=STOP_SIGNAL)

        if tasks:
            _bounded(revoke, "probegate-revoke", ABORT_WAIT_S / 2)
        self._end_run(run_id, ABORT_WAIT_S / 2)

    def _end_run(self, run_id: str, wait_s: float) -> None:
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

    def run(self, specs: Sequence[TrialSpec], inputs: LocalInputs) -> Iterator[Observation]:
        if not specs:
            return
        # Read before any batch goes out: a registry that cannot be read stops the run (GateError).
        self._roster = self.enrolled() if self.enrolled is not None else None
        processes = self.discover()
        self._restarted()  # the broker's run id, before anything goes out: a later change means it restarted
        if processes == 0:
            detail = f"no gate-worker answered on queue {self.queue} within {self.worker_wait_s:.0f}s"
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS) for s in specs)
            return
        if detail := self._rotate():
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS) for s in specs)
            return
        for run_id, image_id in dict.fromkeys((s.run_id, s.image_id) for s in specs if s.image_id):
            self.images.start(run_id, image_id)
        self._inputs = inputs
        try:
            upload(self.blobs, inputs.snapshot, inputs.tree_digest, inputs.fixtures)
            self._uploaded.add(inputs.tree_digest)
            with broker_call("sending batches"):
                sent = self._send(specs, processes)
        except BrokerError as exc:
            detail = f"broker unreachable while dispatching: {exc}"
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS) for s in specs)
            return
        yield from self._gather_assigned(sent, self._timeout(specs, processes))
        self.images.note_failures()

    @property
    def untrusted_workers(self) -> bool:
        """True when results are checked against a worker registry: enrolled workers are not trusted, so
        a chosen cross-check that never came back from another worker leaves its trial unproven."""
        return self.enrolled is not None

    def run_elsewhere(
        self, specs: Sequence[TrialSpec], inputs: LocalInputs, avoid_workers: frozenset[str]
    ) -> Iterator[Observation]:
        """Run `specs` (the very specs already run) on one worker outside `avoid_workers`, picked at
        random among the others' direct queues; none there: a `no_cross_check_worker` event, nothing run."""
        if not specs:
            return
        avoided = {direct_queue(self._keys.get(worker, worker)) for worker in avoid_workers}
        others = [queue for queue in self.direct_queues() if queue not in avoided]
        if not others:
            detail = f"{len(specs)} trial(s) of {specs[0].property_id}: no worker besides {sorted(avoid_workers)}"
            self.events.append(
                HarnessEvent(kind="no_cross_check_worker", property_id=specs[0].property_id, detail=detail)
            )
            return
        queue = secrets.choice(others)
        self._inputs = inputs
        try:
            if inputs.tree_digest not in self._uploaded:
                upload(self.blobs, inputs.snapshot, inputs.tree_digest, inputs.fixtures)
            with broker_call("sending cross-checks"):
                sent = self._send(specs, 1, queue=queue)
        except BrokerError as exc:
            self.events.append(HarnessEvent(kind="cross_check_failed", detail=f"broker unreachable: {exc}"[:300]))
            return
        yield from self._gather(sent, self._timeout(specs, 1))

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

    def batch_size_for(self, specs: Sequence[TrialSpec], processes: int) -> int:
        """Big enough that broker overhead stays small, small enough to spread over every process
        and to finish well inside the visibility timeout (else Redis would redeliver it)."""
        if self.batch_size:
            return self.batch_size
        longest = max(s.deadline_s for s in specs)
        by_visibility = max(1, int((self.visibility_timeout_s / 2 - 30) // longest))
        spread = math.ceil(len(specs) / (4 * max(1, processes)))
        return max(1, min(spread, by_visibility, MAX_BATCH))

    def discover(self) -> int:
        """Worker processes consuming our queue, waiting up to `worker_wait_s` for the first.

        Asked once per executor: a broadcast waits out its whole reply window, about 2 s."""
        if self._processes:
            return self._processes
        give_up = time.monotonic() + self.worker_wait_s
        while True:
            try:
                with broker_call("asking for workers"):
                    stats = self.app.control.inspect(timeout=1.0).active_queues() or {}
                    workers = [name for name, queues in stats.items() if self._on_our_queue(queues)]
                    if workers:
                        self._fleet = frozenset(
                            q["name"] for name in workers for q in stats[name] if q["name"].startswith(DIRECT_PREFIX)
                        )
                        pools = self.app.control.inspect(timeout=1.0, destination=workers).stats() or {}
                        processes = sum(int(s.get("pool", {}).get("max-concurrency", 1)) for s in pools.values())
                        self._processes = processes or len(workers)
                        return self._processes
            except BrokerError:
                pass
            if time.monotonic() >= give_up:
                return 0
            time.sleep(0.5)

    def _on_our_queue(self, queues: Sequence[dict[str, Any]]) -> bool:
        """Whether a worker consuming `queues` serves this executor: it consumes our queue, or, with a roster
        and the shared queue, it is confined to its own direct queue (its own ACL user, worker.celery.acl)."""
        names = [q["name"] for q in queues]
        if self.queue in names:
            return True
        confined = bool(names) and all(name.startswith(DIRECT_PREFIX) for name in names)
        return self.enrolled is not None and self.queue == SHARED_QUEUE and confined

    def _send(
        self, specs: Sequence[TrialSpec], processes: int, *, queue: str | None = None
    ) -> dict[str, list[TrialSpec]]:
        sent: dict[str, list[TrialSpec]] = {}
        groups = batches(specs, self.batch_size_for(specs, processes))
        for batch, (target, key_id) in zip(groups, self._targets(groups, queue), strict=True):
            sent[self._send_batch(batch, target, key_id)] = batch
        return sent

    def _send_batch(self, batch: list[TrialSpec], queue: str, key_id: str | None) -> str:
        """Send one batch to `queue` (`key_id`: the enrolled key meant to answer it); returns its task id."""
        payload = encode_batch(batch)
        # argsrepr: Celery would otherwise render a repr of the whole batch into every message.
        result = self.app.send_task(
            TASK_RUN_BATCH,
            args=[payload],
            kwargs=self.images.wait_hint(batch[0].run_id, batch[0].image_id),
            queue=queue,
            argsrepr=f"<{len(batch)} trials of {batch[0].property_id}>",
        )
        if key_id is not None:
            self._assigned[result.id] = key_id  # only this key's signature counts for it
        self._runs_of[result.id] = batch[0].run_id
        self._queue_of[result.id] = queue
        self._issued[result.id] = spec_digest(payload)  # what a signed result must name
        self._dispatched.update(spec.run_id for spec in batch)
        return result.id

    def assigned(self, run_id: str) -> dict[str, dict[str, int]]:
        """Trials the coordinator assigned in run `run_id`: property id -> enrolled name -> trials (primaries
        only; empty without a roster, where batches go to the shared queue)."""
        return {prop: dict(names) for prop, names in self._assignments.get(run_id, {}).items()}

    def _rotate(self) -> str | None:
        """Set the round of enrolled workers batches are assigned to (None without a roster); the fault
        detail when a roster is in force but no enrolled worker on our queue has a direct queue up."""
        if self._roster is None:
            self._rotation = None
            return None
        active = sorted((w for w in self._roster.workers if w.active), key=lambda w: w.name)
        alive = tuple(w.key_id for w in active if direct_queue(w.key_id) in self._fleet)
        if not alive:
            detail = f"no enrolled worker's direct queue is consumed on queue {self.queue}"
            self.events.append(HarnessEvent(kind="no_enrolled_worker", detail=detail))
            return detail
        if self._rotation is None or self._rotation.workers != alive:
            self._rotation = Rotation(alive)
        return None

    def _targets(self, groups: Sequence[list[TrialSpec]], queue: str | None) -> list[tuple[str, str | None]]:
        """Each batch's queue and the key meant to answer it (None: whoever consumes the queue)."""
        if queue is not None:  # a cross-check, sent to one chosen worker's direct queue
            return [(queue, self._key_of(queue))] * len(groups)
        if self._rotation is None:
            return [(self.queue, None)] * len(groups)
        # Every batch is assigned, not only statistical ones: a worker taking safety or contract batches off
        # the shared queue would choose which trials it answers, and one rule for all is the easier to prove.
        keys, self._rotation = assign(self._rotation, [batch[0].property_id for batch in groups])
        self._note_shares(groups, keys)
        return [(direct_queue(key), key) for key in keys]

    def _key_of(self, queue: str) -> str | None:
        """The enrolled key whose direct queue `queue` is (None without a roster, or for no enrolled key)."""
        workers = self._roster.workers if self._roster is not None else ()
        return next((w.key_id for w in workers if w.active and direct_queue(w.key_id) == queue), None)

    def _note_shares(self, groups: Sequence[list[TrialSpec]], keys: Sequence[str]) -> None:
        """Count each assigned batch's trials by enrolled name; say once per property when it rests on one worker."""
        assert self._roster is not None and self._rotation is not None
        for batch, key in zip(groups, keys, strict=True):
            run_id, prop = batch[0].run_id, batch[0].property_id
            worker = self._roster.by_key(key)
            name = worker.name if worker is not None else key[:16]
            row = self._assignments.setdefault(run_id, {}).setdefault(prop, {})
            row[name] = row.get(name, 0) + len(batch)
            if len(self._rotation.workers) == 1 and (run_id, prop) not in self._lone:
                self._lone.add((run_id, prop))
                detail = f"every batch went to {name!r}, the only enrolled worker up: the row rests on one worker"
                self.events.append(HarnessEvent(kind="one_worker", property_id=prop, detail=detail))

    def _gather_assigned(self, sent: dict[str, list[TrialSpec]], timeout: float) -> Iterator[Observation]:
        """`_gather`, but a batch whose assigned worker never answered goes to another enrolled worker's
        direct queue (each worker at most once per batch) instead of ending as harness faults at once."""
        if self._rotation is None:
            yield from self._gather(sent, timeout)
            return
        tried = {task: frozenset({self._assigned[task]}) for task in sent if task in self._assigned}
        while sent:
            task_of = {spec.key: task for task, batch in sent.items() for spec in batch}
            lost: dict[str, list[Observation]] = {}
            # closing: a caller that stops listening closes _gather too, which revokes what is still queued.
            with contextlib.closing(self._gather(sent, timeout)) as gathered:
                for obs in gathered:
                    task = task_of.get(obs.key)
                    # A task still in _runs_of when _gather yields for it never reported (_gather drops answered ones).
                    if task is not None and task in self._runs_of and task in tried:
                        lost.setdefault(task, []).append(obs)
                        continue
                    yield obs
            again: dict[str, list[TrialSpec]] = {}
            for task, faults in lost.items():
                before = tried.pop(task)
                moved = self._reassign(task, sent[task], before)
                if moved is None:
                    yield from faults
                    continue
                resent, key = moved
                again.update(resent)
                tried.update(dict.fromkeys(resent, before | {key}))
            sent = again
            if sent:
                timeout = self._timeout([spec for batch in sent.values() for spec in batch], 1)

    def _reassign(
        self, task: str, batch: list[TrialSpec], tried: frozenset[str]
    ) -> tuple[dict[str, list[TrialSpec]], str] | None:
        """Send a lost batch to the next enrolled worker it was not sent to: (its new tasks, that worker's key);
        None when every worker was tried or the broker refused the send (the caller yields the batch's faults)."""
        assert self._rotation is not None and self._roster is not None
        self._runs_of.pop(task, None)
        key = reassign(self._rotation, tried)
        if key is None:
            return None
        try:
            with broker_call("reassigning a lost batch"):
                resent = self._send(batch, 1, queue=direct_queue(key))
        except BrokerError:
            return None
        before, after = self._roster.by_key(self._assigned.get(task, "")), self._roster.by_key(key)
        old, new = (w.name if w is not None else "?" for w in (before, after))
        self._move_share(batch, old, new)
        detail = f"task {task} ({len(batch)} trials) never came back from {old!r}: sent to {new!r}"
        self.events.append(HarnessEvent(kind="batch_reassigned", property_id=batch[0].property_id, detail=detail))
        return resent, key

    def _move_share(self, batch: Sequence[TrialSpec], old: str, new: str) -> None:
        """Count a reassigned batch's trials under the worker it went to instead of the one that lost it."""
        row = self._assignments.setdefault(batch[0].run_id, {}).setdefault(batch[0].property_id, {})
        row[old] = row.get(old, 0) - len(batch)
        if row[old] <= 0:
            del row[old]
        row[new] = row.get(new, 0) + len(batch)

    def _timeout(self, specs: Sequence[TrialSpec], processes: int) -> float:
        if self.result_timeout_s is not None:
            return self.result_timeout_s
        # Every trial at its deadline, spread over the processes, plus one redelivery's wait.
        work = sum(s.deadline_s + 5 for s in specs) / max(1, processes)
        return work + self.visibility_timeout_s + 60

    def _gather(self, sent: dict[str, list[TrialSpec]], timeout: float) -> Iterator[Observation]:
        """Yield the batches' observations as they arrive. An unreachable broker is waited for (at most
        `broker_wait_s`, said on stderr; the wait does not count against `timeout`), and one that came
        back empty (restarted without persistence) is given the tree, the image and the batches again."""
        pending = set(sent)
        started = time.monotonic()
        waited = 0.0  # seconds the broker was unreachable: not the batches' fault
        broker_down_since: float | None = None
        next_check = started + EPOCH_CHECK_S
        try:
            while pending:
                now = time.monotonic()
                down = now - broker_down_since if broker_down_since is not None else 0.0
                give_up = started + timeout + waited + down
                if now >= give_up or down > self.broker_wait_s:
                    break
                try:
                    if now >= next_check:
                        next_check = now + EPOCH_CHECK_S
                        if (epoch := self._restarted()) is not None:
                            self._republish(sent, pending, epoch)
                    slice_s = max(0.05, min(1.0, give_up - now))
                    with broker_call("reading results"):
                        arrived = self._ready(pending, slice_s)
                    # Asked after reading: the same server as at the last look means these results were
                    # written before any restart. One read from a restarted broker may answer a batch with
                    # what the restart took (its tree gone mid-fetch): it is not used, but sent again.
                    if arrived and (epoch := self._restarted(strict=True)) is not None:
                        self._republish(sent, pending, epoch)
                        continue
                    for task_id, meta in arrived.items():
                        pending.discard(task_id)
                        self._runs_of.pop(task_id, None)
                        yield from self._observations(sent[task_id], meta, task_id)
                except BrokerError as exc:
                    if broker_down_since is None:
                        broker_down_since = time.monotonic()
                        self.events.append(HarnessEvent(kind="broker_unreachable", detail=str(exc)[:200]))
                        self.note(
                            f"gate: the broker is unreachable ({exc}); waiting up to {self.broker_wait_s:.0f}s"
                            " for it to come back"
                        )
                    time.sleep(0.5)
                    continue
                if broker_down_since is not None:
                    back_after = time.monotonic() - broker_down_since
                    waited += back_after
                    broker_down_since = None
                    next_check = 0.0  # at once: did it lose what it held?
                    self.note(f"gate: the broker is back after {back_after:.1f}s; the run goes on")
        except GeneratorExit:
            # The caller stopped listening (a decided property): queued batches are revoked so no
            # worker starts them; running ones finish and their results expire. (Ctrl-C goes through
            # `abort`, which also stops the running ones.)
            with contextlib.suppress(BrokerError), broker_call("revoking queued batches"):
                self.app.control.revoke(list(pending))
            raise
        for task_id in pending:
            batch = sent[task_id]
            self.events.append(
                HarnessEvent(
                    kind="batch_lost",
                    property_id=batch[0].property_id,
                    detail=f"task {task_id} ({len(batch)} trials) never reported",
                )
            )
            detail = f"no result within {timeout:.0f}s (worker or broker lost)"
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS) for s in batch)

    def _ready(self, pending: set[str], timeout: float) -> dict[str, Any]:
        """Task id -> meta of the pending batches that finished, waiting up to `timeout` for the first. Each is
        read from the place of the queue it was sent to (worker.celery.results): a direct queue's results
        from under that queue alone, where no other worker's broker user can write."""
        keys = {task: result_key(task, self._queue_of.get(task)) for task in pending}
        return read_ready(self.app.backend, keys, timeout, self.poll_s)

    def _restarted(self, *, strict: bool = False) -> str | None:
        """The broker's new run id when it restarted since the last look (None: the same server, or it
        cannot be asked; `strict`: BrokerError then); the first look only records it."""
        try:
            with broker_call("asking the broker for its run id"):
                epoch = self._probe.info("server").get("run_id")
        except BrokerError:
            if strict:
                raise
            return None
        if not isinstance(epoch, str) or not epoch:
            return None
        if self._epoch is None:
            self._epoch = epoch
            return None
        return epoch if epoch != self._epoch else None

    def _republish(self, sent: dict[str, list[TrialSpec]], pending: set[str], epoch: str) -> None:
        """The broker restarted empty: upload the tree and fixtures, publish the run's image and send every
        unanswered batch again (new task ids; a result under an old id is ignored). Per batch, so a broker
        that fails again midway leaves the rest for the next look, which still sees the new run id."""
        lost = [task for task in sent if task in pending]
        self.note(f"gate: the broker restarted and lost what it held; sending {len(lost)} batch(es) again")
        if (inputs := self._inputs) is not None:
            upload(self.blobs, inputs.snapshot, inputs.tree_digest, inputs.fixtures)
            self._uploaded.add(inputs.tree_digest)
        for run_id, image_id in dict.fromkeys((sent[t][0].run_id, sent[t][0].image_id) for t in lost):
            if image_id:
                self.images.republish(run_id, image_id)
        trials = 0
        for task in lost:
            batch = sent[task]
            with broker_call("sending batches again"):
                again = self._send_batch(batch, self._queue_of.get(task, self.queue), self._assigned.get(task))
            sent[again] = batch
            pending.add(again)
            pending.discard(task)
            self._runs_of.pop(task, None)
            trials += len(batch)
        self._epoch = epoch
        detail = f"broker restarted empty: {len(lost)} batch(es) ({trials} trials), the tree and the image sent again"
        self.events.append(HarnessEvent(kind="broker_restarted", detail=detail))

    def _observations(self, batch: list[TrialSpec], meta: dict[str, Any], task_id: str) -> Iterator[Observation]:
        if meta.get("status") != "SUCCESS":
            detail = f"worker task {meta.get('status')}: {str(meta.get('result'))[:300]}"
            # A task that raised on the worker is a fault nobody has shown to be outside the patch.
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.UNKNOWN) for s in batch)
            return
        result = meta["result"]
        signer: EnrolledWorker | None = None
        if self._roster is not None:
            checked = self._signer(task_id, result)
            if not isinstance(checked, EnrolledWorker):
                # UNKNOWN, never HARNESS: a credit would let whoever forged it silence the property.
                yield from (Observation.harness_fault(s, checked, origin=FaultOrigin.UNKNOWN) for s in batch)
                return
            signer = checked
        if fetched := result.get("fetched"):
            self.events.append(
                HarnessEvent(
                    kind="image_fetched",
                    property_id=batch[0].property_id,
                    detail=f"{result['worker']} fetched {batch[0].image_id[:19]} via {fetched.get('via')} "
                    f"in {fetched.get('seconds')}s",
                )
            )
        if result.get("redelivered"):
            self.events.append(
                HarnessEvent(
                    kind="redelivery",
                    property_id=batch[0].property_id,
                    detail=f"{len(batch)} trials ran again from scratch on {result['worker']}",
                )
            )
        wanted = {spec.key for spec in batch}
        key_id = signer.key_id if signer is not None else _claimed_key(result)
        for obs in decode_observations(result["observations"]):
            if obs.key in wanted:
                # The enrolled name, never what the worker wrote about itself.
                obs = obs if signer is None else obs.model_copy(update={"worker_id": signer.name})
                if key_id:
                    self._keys[obs.worker_id] = key_id
                yield obs
            else:
                self.events.append(
                    HarnessEvent(
                        kind="stray_result",
                        property_id=obs.property_id,
                        detail=f"trial {obs.trial_index} was not in its batch; ignored",
                    )
                )

    def _signer(self, task_id: str, result: Any) -> EnrolledWorker | str:
        """The enrolled worker whose signature binds this result to the batch we issued, or (after
        recording a HarnessEvent of the refusal's kind) the fault detail for its trials."""
        assert self._roster is not None
        observations = result.get("observations") if isinstance(result, dict) else None
        if not isinstance(observations, str):
            checked: EnrolledWorker | tuple[Any, str] = (Refusal.UNSIGNED, "the result carries no observations")
        else:
            claim = result.get("signature")
            checked = check_result(self._roster, self._issued, task_id, observations, claim, verify_pem)
            if isinstance(checked, EnrolledWorker):
                checked = check_assigned(self._roster, self._assigned.get(task_id), checked)
        if isinstance(checked, EnrolledWorker):
            return checked
        kind, detail = checked
        self.events.append(HarnessEvent(kind=str(kind), detail=f"batch {task_id}: {detail}"[:300]))
        return f"result refused ({kind}): {detail}"[:300]


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _claimed_key(result: Any) -> str | None:
    """The key id an unchecked result says signed it (no roster in force: a hint for routing cross-checks only)."""
    claim = result.get("signature") if isinstance(result, dict) else None
    key_id = claim.get("key_id") if isinstance(claim, dict) else None
    return key_id if isinstance(key_id, str) else None


def _bounded(call: Callable[[], None], name: str, wait_s: float) -> None:
    """Run `call` on a daemon thread and wait at most `wait_s` for it (kombu retries a lost broker for longer)."""
    sender = threading.Thread(target=call, name=name, daemon=True)
    sender.start()
    sender.join(wait_s)
