"""How a run's batches go out and come back under the Celery executor: a wave's primaries dealt to the enrolled
workers as they have room (worker.celery.coordinator.dealer), copies of its stragglers, which answers count (the
first valid one of a batch sent twice), and batches moved or sent again when their worker is gone or the broker
lost them. It is the executor's side of gathering's Outbox (worker.celery.coordinator.gathering);
`CeleryExecutor` (worker.celery.coordinator.dispatch) holds the state it works on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from celery import Celery

from gate.core.card.card import HarnessEvent
from gate.core.errors import BrokerError
from gate.core.suite.batching import batches
from gate.core.suite.trial import FaultOrigin, Observation, TrialSpec
from gate.io.snapshot import LocalInputs
from worker.celery.coordinator.answers import Answers
from worker.celery.coordinator.assigner import Assigner
from worker.celery.coordinator.control import WorkerControl
from worker.celery.coordinator.dealer import Dealer
from worker.celery.coordinator.gathering import Gathering
from worker.celery.coordinator.imagepublish import RunImages
from worker.celery.coordinator.liveness import Liveness
from worker.celery.shared.app import TASK_RUN_BATCH, direct_queue
from worker.celery.shared.broker import broker_call
from worker.celery.shared.wire import encode_batch

STRANDED_S = 30.0  # the most a batch no other worker can take waits for its own worker to come back


class BatchOutbox:
    """The sending half of the Celery executor, over the state the executor builds (declared here)."""

    app: Celery
    queue: str
    events: list[HarnessEvent]
    gathering: Gathering
    assigner: Assigner
    answers: Answers
    dealer: Dealer
    liveness: Liveness
    control: WorkerControl
    images: RunImages
    _inputs: LocalInputs | None
    _moot: dict[str, str]
    _held_by_rebooted: set[str]

    def batch_size_for(self, specs: Sequence[TrialSpec], processes: int) -> int:
        raise NotImplementedError

    def _upload(self, inputs: LocalInputs) -> None:
        raise NotImplementedError

    def _timeout(self, specs: Sequence[TrialSpec], processes: int) -> float:
        raise NotImplementedError

    def _send(
        self, specs: Sequence[TrialSpec], processes: int, *, queue: str | None = None
    ) -> dict[str, list[TrialSpec]]:
        """Send `specs` in batches: to `queue` (one chosen worker's), else a new wave of primaries, dealt to the
        enrolled workers up as they have room (the rest follow as answers come back, `more`), or without a
        roster all at once to the shared queue. Returns the batches sent, by task id."""
        groups = batches(specs, self.batch_size_for(specs, processes))
        if queue is None and self.assigner.assigning:
            self.dealer.start(self.assigner.plan(groups), self.control.processes_of(self.assigner.workers))
            return self._deal()
        sent: dict[str, list[TrialSpec]] = {}
        for batch, (target, key_id) in zip(groups, self.assigner.targets(groups, queue, self.queue), strict=True):
            sent[self._send_batch(batch, target, key_id, primary=queue is None)] = batch
        return sent

    def _deal(self) -> dict[str, list[TrialSpec]]:
        """Send the waiting primaries the enrolled workers up have room for."""
        if not (dealt := self.dealer.next(self.liveness.gone)):
            return {}
        self.assigner.dealt([batch for batch, _ in dealt], [key for _, key in dealt])
        sent: dict[str, list[TrialSpec]] = {}
        for batch, key in dealt:
            task = self._send_batch(batch, direct_queue(key), key, primary=True)
            self.dealer.sent(task, key, batch)
            sent[task] = batch
        return sent

    def _send_batch(self, batch: list[TrialSpec], queue: str, key_id: str | None, *, primary: bool) -> str:
        """Send one batch to `queue` (`key_id`: the enrolled key meant to answer it; `primary`: it carries its
        row's share, not a cross-check's); returns its task id."""
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
            self.assigner.sent(result.id, key_id, primary=primary)  # only this key's signature counts for it
            self.liveness.watch([key_id])
        self.gathering.sent(result.id, batch[0].run_id, queue)
        self.answers.issue(result.id, payload)  # what a signed result must name
        self.control.busy(spec.run_id for spec in batch)
        return result.id

    def answered(self, task_id: str, batch: list[TrialSpec], meta: dict[str, Any]) -> Iterator[Observation]:
        """The observations that count from a batch's result meta (worker.celery.coordinator.answers). Of a batch
        sent twice (a straggler's copy), the first answer that is not refused counts and the other copy is moot."""
        roster, assigned = self.assigner.roster, self.assigner.key(task_id)
        observations = list(self.answers.observations(batch, meta, task_id, roster, assigned))
        other = self.dealer.copy_of(task_id)
        self.dealer.done(task_id)
        if other is not None:
            if task_id in self.answers.refused:
                return iter(())  # the other copy may still answer validly; if it never does, its faults count
            self._moot[task_id] = other
            self.assigner.won(task_id, other, batch)
        return iter(observations)

    def superseded(self, task_id: str) -> str | None:
        """The other copy of answered batch `task_id`, whose answer no longer counts (None: there is none)."""
        other = self._moot.pop(task_id, None)
        if other is not None:
            self.dealer.done(other)
        return other

    def more(self) -> dict[str, list[TrialSpec]]:
        """The primaries the workers have room for now, and the copies of stragglers sent to idle workers."""
        sent = self._deal()
        for task, batch, key in self.dealer.copies(self.liveness.gone):
            copy = self._send_batch(batch, direct_queue(key), key, primary=False)
            self.dealer.sent(copy, key, batch, copy_of=task)
            self.assigner.copied(task, copy)
            slow, idle = self.assigner.name_of(self.assigner.key(task)), self.assigner.name_of(key)
            detail = f"task {task} ({len(batch)} trials) still out on {slow!r}: a copy sent to idle {idle!r} as {copy}"
            self.events.append(HarnessEvent(kind="batch_duplicated", property_id=batch[0].property_id, detail=detail))
            sent[copy] = batch
        return sent

    def send_inputs_again(self, batches: list[list[TrialSpec]]) -> None:
        """Upload the run's tree and fixtures and publish the batches' images again (the broker lost them)."""
        self.liveness.restarted()  # the restart took every heartbeat with it
        if (inputs := self._inputs) is not None:
            self._upload(inputs)
        for run_id, image_id in dict.fromkeys((batch[0].run_id, batch[0].image_id) for batch in batches):
            if image_id:
                self.images.republish(run_id, image_id)

    def send_again(self, batch: list[TrialSpec], queue: str | None, task_id: str) -> str:
        """Send a batch the broker lost to the queue it went to, for the key it was assigned to; its new task id."""
        key, primary = self.assigner.key(task_id), self.assigner.primary(task_id)
        again = self._send_batch(batch, queue or self.queue, key, primary=primary)
        self.dealer.replaced(task_id, again)
        return again

    def presumed_lost(self, pending: Collection[str]) -> list[str]:
        """The batches of `pending` assigned to a worker whose heartbeat lapsed (said once per worker), or to one
        that restarted since (a new boot id: it lost what it held, and is sent those batches again)."""
        gone = self.liveness.look()
        lost = [task for task in pending if self.assigner.key(task) in gone and not self._stranded(task)]
        for key in {self.assigner.key(task) for task in lost}:
            if key is not None and self.assigner.first_gone(key):
                name = self.assigner.name_of(key)
                detail = f"{name!r} sent no heartbeat for {self.liveness.unseen_s(key):.0f}s: presumed gone"
                self.events.append(HarnessEvent(kind="worker_gone", detail=detail))
        rebooted = self.liveness.rebooted() - gone
        held = [task for task in pending if self.assigner.key(task) in rebooted]
        for key in rebooted:
            if count := sum(self.assigner.key(task) == key for task in held):
                detail = f"{self.assigner.name_of(key)!r} restarted: the {count} batch(es) it held sent to it again"
                self.events.append(HarnessEvent(kind="worker_restarted", detail=detail))
        self._held_by_rebooted.update(held)
        return lost + held

    def _stranded(self, task: str) -> bool:
        """Whether lost batch `task` has nowhere else to go yet and its worker may still come back: it waits up to
        STRANDED_S past the presumption for a restart (which sends it to that worker again), then ends."""
        key = self.assigner.key(task)
        if key is None or self.assigner.next_key(task, gone=self.liveness.gone) is not None:
            return False
        return self.liveness.unseen_s(key) < (self.liveness.gone_after_s or 0.0) + STRANDED_S

    def send_elsewhere(self, task_id: str, batch: list[TrialSpec]) -> dict[str, list[TrialSpec]] | None:
        """A batch whose worker is gone, sent to the next enrolled worker that is up and was not tried for it
        (nothing sent when a copy of it is out on another worker: that one counts); one whose worker restarted,
        sent to that worker again."""
        if self.dealer.copy_of(task_id) is not None:
            self.dealer.done(task_id)
            return {}
        if task_id in self._held_by_rebooted:  # its worker is back but lost it: the same worker runs it again
            self._held_by_rebooted.discard(task_id)
            key = self.assigner.key(task_id)
            try:
                with broker_call("sending a batch again"):
                    again = self._send_batch(
                        batch, direct_queue(key or ""), key, primary=self.assigner.primary(task_id)
                    )
            except BrokerError:
                return None
            self.dealer.replaced(task_id, again)
            return {again: batch}
        return self._reassign(task_id, batch)

    def twin(self, task_id: str) -> str | None:
        """The other copy of batch `task_id` still out (None: there is none)."""
        return self.dealer.copy_of(task_id)

    def _gather_assigned(self, sent: dict[str, list[TrialSpec]], timeout: float) -> Iterator[Observation]:
        """Gathering, but a batch whose assigned worker never answered goes to another enrolled worker's
        direct queue (each worker at most once per batch) instead of ending as harness faults at once."""
        if not self.assigner.assigning:
            yield from self.gathering.gather(sent, timeout, self)
            return
        while sent:
            task_of: dict[Any, str] = {}
            lost: dict[str, list[Observation]] = {}
            # closing: a caller that stops listening closes the gathering too, which revokes what is still queued.
            with contextlib.closing(self.gathering.gather(sent, timeout, self)) as gathered:
                for obs in gathered:
                    if obs.key not in task_of:  # batches dealt since the last look joined `sent`
                        task_of = {spec.key: task for task, batch in sent.items() for spec in batch}
                    task = task_of.get(obs.key)
                    # A task still in flight when gathering yields for it never reported (answered ones are dropped).
                    if task is not None and self.gathering.in_flight(task) and self.assigner.key(task) is not None:
                        lost.setdefault(task, []).append(obs)
                        continue
                    yield obs
            again: dict[str, list[TrialSpec]] = {}
            for task, faults in lost.items():
                if (resent := self._reassign(task, sent[task])) is None:
                    yield from faults
                    continue
                again.update(resent)
            sent = again
            if sent:
                timeout = self._timeout([spec for batch in sent.values() for spec in batch], 1)
        for batch in self.dealer.take_waiting():  # every worker presumed gone before the wave was dealt
            detail = "no enrolled worker was left up to take it"
            yield from (Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS) for s in batch)

    def _reassign(self, task: str, batch: list[TrialSpec]) -> dict[str, list[TrialSpec]] | None:
        """Send a lost batch to the next enrolled worker it was not sent to: its new tasks; None when every
        worker was tried or the broker refused the send."""
        if (key := self.assigner.next_key(task, gone=self.liveness.gone)) is None:
            return None
        self.gathering.drop(task)
        self.dealer.done(task)
        try:
            with broker_call("reassigning a lost batch"):
                resent = self._send(batch, 1, queue=direct_queue(key))
        except BrokerError:
            return None
        self.assigner.moved(task, batch, key, resent)
        return resent
