"""The Celery executor: the coordinator's side of running trials on many machines.

Same interface as the local pool (`run(specs, inputs)` yields observations), so nothing above
the executor knows which one ran. Inputs are uploaded by content first. The run's image is
published once, in the background from `open` on (see worker.celery.coordinator.imagepublish), so any worker
can fetch what it lacks; batches go at once to the shared queue (or a pinned one), and a worker
that holds the image runs them without waiting for that. Results are folded as they arrive. A
batch that never reports (worker gone, broker restarted without persistence) turns into harness
faults after the result timeout: the run ends as harness_error, never as a false pass. Workers
keep a run's containers warm between its batches; `close` broadcasts that the run is over so
every worker removes them at once.

With a worker registry (`enrolled`) the coordinator decides who runs what (assigner.py), sends each worker its
batches as it has room (dealer.py; the sending half of the executor is outbox.py) and takes only results signed by
the key each batch was sent to (answers.py). Results are gathered through broker outages and restarts
(gathering.py); workers are found and told of a run's end by control.py, all beside this module.
"""

from __future__ import annotations

import contextlib
import math
import secrets
from collections.abc import Callable, Iterator, Sequence

from gate.core.card.card import HarnessEvent
from gate.core.errors import BrokerError, GateError
from gate.core.suite.trial import FaultOrigin, Limits, Observation, TrialSpec
from gate.core.trust.dealing import ROOM_PER_PROCESS
from gate.core.trust.enrolment import Roster
from gate.io.snapshot import LocalInputs
from worker.celery.coordinator.answers import Answers
from worker.celery.coordinator.assigner import Assigner
from worker.celery.coordinator.control import WorkerControl
from worker.celery.coordinator.dealer import Dealer
from worker.celery.coordinator.gathering import BROKER_WAIT_S, Gathering
from worker.celery.coordinator.imagepublish import RunImages
from worker.celery.coordinator.liveness import Liveness, redis_reader
from worker.celery.coordinator.outbox import BatchOutbox
from worker.celery.shared.app import SHARED_QUEUE, VISIBILITY_TIMEOUT_S, direct_queue, make_app
from worker.celery.shared.beats import GONE_AFTER_S
from worker.celery.shared.blobs import BlobStore, RedisBlobStore, upload
from worker.celery.shared.broker import broker_call
from worker.host.engine import DEFAULT_IMAGE

MAX_BATCH = 1000
ABORT_WAIT_S = 2.0  # the most `abort` waits on the broker: Ctrl-C must stop the run within seconds
CLOSE_WAIT_S = 3.0  # the most `close` waits for its broadcast to be published (kombu retries for longer)
PUBLISH_WAIT_S = 300.0  # the most a worker lacking the run's image waits for its publication in flight


class CeleryExecutor(BatchOutbox):
    """Dispatches trial batches to `gate-worker serve` processes over Redis. `queue` pins batches to
    a fleet started with `--queue` (default: the shared queue every worker consumes); `registry`
    (host[:port]) carries the run's image instead of the blob store; `enrolled` (the worker registry,
    read at each run) makes signed results from enrolled workers the only ones taken. Every tree the inputs
    serve is uploaded (a paired property's base tree beside the patched one), each batch's worker fetching
    the one its spec names."""

    serves_every_tree = True  # workers fetch each batch's tree by `spec.tree_digest` (BlobInputs.tree_dir)

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
        gone_after_s: float | None = GONE_AFTER_S,
        room_per_process: int = ROOM_PER_PROCESS,
    ) -> None:
        self.app = make_app(broker, visibility_timeout_s=visibility_timeout_s)
        self.blobs = blobs or RedisBlobStore(broker)
        self.image = image
        self.queue = queue or SHARED_QUEUE
        self.worker_wait_s = worker_wait_s
        self.result_timeout_s = result_timeout_s
        self.visibility_timeout_s = visibility_timeout_s
        self.batch_size = batch_size
        self.events: list[HarnessEvent] = []
        self.gathering = Gathering(broker, self.app, self.events, wait_s=broker_wait_s, poll_s=poll_s, note=note)
        self.enrolled = enrolled
        self.control = WorkerControl(self.app, self.queue, wait_s=worker_wait_s, enrolled=enrolled is not None)
        self.assigner = Assigner(self.events)  # who runs what (with a roster)
        self.answers = Answers(self.events)  # which results count
        self.dealer = Dealer(
            self.events, per_process=room_per_process
        )  # a wave's primaries by room, and the copies of its stragglers
        self._moot: dict[str, str] = {}  # task id answered -> its other copy, which no longer counts
        self._held_by_rebooted: set[str] = set()  # batches a worker lost by restarting: sent to it again
        # Which assigned workers vanished (heartbeats): their batches go to others within seconds, not minutes.
        self.liveness = Liveness(redis_reader(broker), gone_after_s)
        self._inputs: LocalInputs | None = None  # the run's inputs, uploaded again after a broker restart
        self._uploaded: set[str] = set()  # trees `run` uploaded: a cross-check of their trials needs no upload
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
        self.control.end_run(run_id, CLOSE_WAIT_S)

    def abort(self, run_id: str) -> None:
        """Stop the run now: batches not started are revoked, running ones are stopped in their worker
        process (which removes its containers, worker.celery.worker.tasks), and every worker removes the run's
        containers. Waits for no publication and at most ABORT_WAIT_S for the broker."""
        self.control.stop(self.gathering.take_run(run_id), ABORT_WAIT_S / 2)
        self.control.end_run(run_id, ABORT_WAIT_S / 2)

    def run(self, specs: Sequence[TrialSpec], inputs: LocalInputs) -> Iterator[Observation]:
        if not specs:
            return
        # Read before any batch goes out: a registry that cannot be read stops the run (GateError).
        self.assigner.roster = self.enrolled() if self.enrolled is not None else None
        processes = self.discover()
        self.gathering.restarted()  # the broker's run id, before anything goes out: a later change means it restarted
        if processes == 0:
            detail = f"no gate-worker answered on queue {self.queue} within {self.worker_wait_s:.0f}s"
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS) for s in specs)
            return
        if detail := self.assigner.rotate(self.control.on_queue, self.queue, gone=self.liveness.gone):
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS) for s in specs)
            return
        self.liveness.watch(self.assigner.workers)  # every worker a batch may go to, lost ones included
        for run_id, image_id in dict.fromkeys((s.run_id, s.image_id) for s in specs if s.image_id):
            self.images.start(run_id, image_id)
        self._inputs = inputs
        try:
            self._upload(inputs)
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

    @property
    def trusted_workers(self) -> frozenset[str]:
        """The active owned workers of the registry read for the run (their results need no second run)."""
        return self.assigner.roster.owned() if self.assigner.roster is not None else frozenset()

    def run_elsewhere(
        self, specs: Sequence[TrialSpec], inputs: LocalInputs, avoid_workers: frozenset[str]
    ) -> Iterator[Observation]:
        """Run `specs` (the very specs already run) on one worker outside `avoid_workers`, picked at
        random among the others' direct queues (with a roster in force, the active enrolled ones' only, and
        the owned ones' when any is up); none there: a `no_cross_check_worker` event, nothing run."""
        if not specs:
            return
        avoided_keys = {self.answers.key_of(worker) for worker in avoid_workers}
        avoided = {direct_queue(key) for key in avoided_keys}
        gone = {direct_queue(key) for key in self.liveness.gone}
        others = [queue for queue in self.direct_queues() if queue not in avoided | gone]
        if (roster := self.assigner.roster) is not None:
            # A worker outside the registry is up on the broker but none of its results would count: a replay
            # sent there would never come back, and the trial it should prove would stay unproven by luck.
            enrolled = {direct_queue(w.key_id) for w in roster.workers if w.active}
            others = [queue for queue in others if queue in enrolled]
            # Verification sits where trust is: an owned worker up takes every second run.
            owned = [queue for queue in others if queue in {direct_queue(w.key_id) for w in roster.workers if w.owned}]
            others = owned or others
        if not others:
            detail = f"{len(specs)} trial(s) of {specs[0].property_id}: no worker besides {sorted(avoid_workers)}"
            self.events.append(
                HarnessEvent(kind="no_cross_check_worker", property_id=specs[0].property_id, detail=detail)
            )
            return
        queue = secrets.choice(others)
        self._inputs = inputs
        try:
            if any(spec.tree_digest not in self._uploaded for spec in specs):
                self._upload(inputs)
            with broker_call("sending cross-checks"):
                sent = self._send(specs, 1, queue=queue)
            self.assigner.avoid(sent, avoided_keys)  # if its worker vanishes, the copy goes to none of these
        except BrokerError as exc:
            self.events.append(HarnessEvent(kind="cross_check_failed", detail=f"broker unreachable: {exc}"[:300]))
            return
        yield from self.gathering.gather(sent, self._timeout(specs, 1), self)

    def _upload(self, inputs: LocalInputs) -> None:
        """Put every tree `inputs` serves (the patched one, a paired property's base tree) and the fixtures
        where workers fetch them by digest."""
        for digest, tree in inputs.trees().items():
            upload(self.blobs, tree, digest, inputs.fixtures if digest == inputs.tree_digest else {})
            self._uploaded.add(digest)

    def direct_queues(self) -> tuple[str, ...]:
        """The direct queues of the workers on the broker (each consumes its own), asked once."""
        return self.control.direct_queues()

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
        """Worker processes consuming our queue, waiting up to `worker_wait_s` for the first (asked once)."""
        return self.control.discover()

    def assigned(self, run_id: str) -> dict[str, dict[str, int]]:
        """Trials the coordinator assigned in run `run_id`: property id -> enrolled name -> trials (primaries
        only; empty without a roster, where batches go to the shared queue)."""
        return self.assigner.assigned(run_id)

    def _timeout(self, specs: Sequence[TrialSpec], processes: int) -> float:
        if self.result_timeout_s is not None:
            return self.result_timeout_s
        # Every trial at its deadline, spread over the processes, plus one redelivery's wait.
        work = sum(s.deadline_s + 5 for s in specs) / max(1, processes)
        return work + self.visibility_timeout_s + 60
