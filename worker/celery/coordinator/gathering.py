"""Gathering a run's results from a broker that may go away or restart: the coordinator's side of batches
in flight.

`Gathering` keeps, for every batch sent and not yet answered, its run and the queue it went to (its result
is read from that queue's place, worker.celery.shared.results). It waits out an unreachable broker (at most
`wait_s`, said on stderr, not counted against the batches' timeout) and asks, about once a second, for the
server's run id: a Redis that restarted without persistence has a new one and lost every batch, tree and
image it held, so the unanswered batches are sent again through the `Outbox` (the executor's side). A
batch that never reports ends as harness faults: never a false pass.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Collection, Iterator
from typing import Any, Protocol

import redis
from celery import Celery

from gate.core.card.card import HarnessEvent
from gate.core.errors import BrokerError
from gate.core.suite.trial import FaultOrigin, Observation, TrialSpec
from worker.celery.shared.broker import broker_call
from worker.celery.shared.results import read_ready, result_key

BROKER_WAIT_S = 120.0  # the most a run waits for an unreachable broker to come back
EPOCH_CHECK_S = 1.0  # how often a gathering run asks whether the broker restarted (and lost what it held)


class Outbox(Protocol):
    """What gathering asks of the side that sends the batches."""

    def answered(self, task_id: str, batch: list[TrialSpec], meta: dict[str, Any]) -> Iterator[Observation]:
        """The observations that count from a batch's result meta."""
        ...

    def send_inputs_again(self, batches: list[list[TrialSpec]]) -> None:
        """Upload the run's tree and publish its images again, for the batches a restart lost."""
        ...

    def send_again(self, batch: list[TrialSpec], queue: str | None, task_id: str) -> str:
        """Send a lost batch again where it went before (None: not known), for the same worker; its new task id."""
        ...

    def presumed_lost(self, pending: Collection[str]) -> list[str]:
        """The batches of `pending` whose worker is presumed gone (its heartbeat lapsed) or restarted."""
        ...

    def send_elsewhere(self, task_id: str, batch: list[TrialSpec]) -> dict[str, list[TrialSpec]] | None:
        """Send a batch whose worker is gone to another one (to the same one when it restarted): its new batches
        (empty: a copy of it is out elsewhere already; None: no worker took it)."""
        ...

    def more(self) -> dict[str, list[TrialSpec]]:
        """Batches sent now that workers have room (a wave's next primaries, stragglers' copies)."""
        ...

    def superseded(self, task_id: str) -> str | None:
        """The other copy of answered batch `task_id`, whose answer no longer counts (None: there is none)."""
        ...

    def twin(self, task_id: str) -> str | None:
        """The other copy of batch `task_id` still out (None: there is none)."""
        ...


class Gathering:
    """The batches in flight (task id -> run, queue) and the broker they wait on: its run id, its outages."""

    def __init__(
        self,
        broker: str,
        app: Celery,
        events: list[HarnessEvent],
        *,
        wait_s: float,
        poll_s: float,
        note: Callable[[str], None] | None = None,
    ) -> None:
        # Asked for the server's run id: a Redis that restarted without persistence has a new one.
        self._probe = redis.Redis.from_url(broker, socket_timeout=2.0, socket_connect_timeout=2.0)
        self._epoch: str | None = None
        self.app, self.events, self.wait_s, self.poll_s = app, events, wait_s, poll_s
        self.note = note or _to_stderr  # what the person waiting is told: an outage, a restart
        self._runs_of: dict[str, str] = {}  # task id -> run id, for batches not yet answered (abort revokes them)
        self._queue_of: dict[str, str] = {}  # task id -> the queue it went to (sent again there after a restart)
        # Batches given up on (task id -> the event an answer from it now is, its batch): its worker presumed
        # gone (`late_answer`), or the other copy of a straggler answered first (`duplicate_answer`).
        self._abandoned: dict[str, tuple[str, list[TrialSpec]]] = {}

    def sent(self, task_id: str, run_id: str, queue: str) -> None:
        """Note a batch sent to `queue`: it is in flight until answered."""
        self._runs_of[task_id] = run_id
        self._queue_of[task_id] = queue

    def in_flight(self, task_id: str) -> bool:
        """Whether the batch never reported (gathering drops answered ones; a lost one stays until dropped)."""
        return task_id in self._runs_of

    def drop(self, task_id: str) -> None:
        """Stop counting a batch as in flight (answered, sent again under a new id, or given up on)."""
        self._runs_of.pop(task_id, None)

    def take_run(self, run_id: str) -> list[str]:
        """The run's batches in flight, no longer counted as such (the run is being aborted)."""
        tasks = [task for task, run in self._runs_of.items() if run == run_id]
        for task in tasks:
            del self._runs_of[task]
        return tasks

    def gather(self, sent: dict[str, list[TrialSpec]], timeout: float, outbox: Outbox) -> Iterator[Observation]:
        """Yield the batches' observations as they arrive. An unreachable broker is waited for (at most
        `wait_s`, said on stderr; the wait does not count against `timeout`), and one that came
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
                if now >= give_up or down > self.wait_s:
                    break
                try:
                    if now >= next_check:
                        next_check = now + EPOCH_CHECK_S
                        if (epoch := self.restarted()) is not None:
                            self._republish(sent, pending, epoch, outbox)
                        for task_id in outbox.presumed_lost(pending):
                            extra, faults = self._move(task_id, sent, pending, outbox)
                            waited += extra
                            yield from faults
                    slice_s = max(0.05, min(1.0, give_up - now))
                    with broker_call("reading results"):
                        arrived = self._ready(pending, slice_s)
                    # Asked after reading: the same server as at the last look means these results were
                    # written before any restart. One read from a restarted broker may answer a batch with
                    # what the restart took (its tree gone mid-fetch): it is not used, but sent again.
                    if arrived and (epoch := self.restarted(strict=True)) is not None:
                        self._republish(sent, pending, epoch, outbox)
                        continue
                    for task_id, meta in arrived.items():
                        if task_id not in pending:  # abandoned, by this gathering or another one on its thread
                            self._late(task_id)
                            continue
                        pending.discard(task_id)
                        self.drop(task_id)
                        yield from outbox.answered(task_id, sent[task_id], meta)
                        if (other := outbox.superseded(task_id)) is not None and other in pending:
                            pending.discard(other)
                            self.drop(other)
                            self._abandoned[other] = ("duplicate_answer", sent[other])
                    for task_id, batch in outbox.more().items():
                        sent[task_id] = batch
                        pending.add(task_id)
                except BrokerError as exc:
                    if broker_down_since is None:
                        broker_down_since = time.monotonic()
                        self.events.append(HarnessEvent(kind="broker_unreachable", detail=str(exc)[:200]))
                        self.note(
                            f"gate: the broker is unreachable ({exc}); waiting up to {self.wait_s:.0f}s"
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
            # the executor's `abort`, which also stops the running ones.)
            with contextlib.suppress(BrokerError), broker_call("revoking queued batches"):
                self.app.control.revoke(list(pending))
            raise
        faulted: set[str] = set()
        for task_id in pending:
            if outbox.twin(task_id) in faulted:
                continue  # two copies of one batch: its trials end as faults once
            faulted.add(task_id)
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

    def _move(
        self, task_id: str, sent: dict[str, list[TrialSpec]], pending: set[str], outbox: Outbox
    ) -> tuple[float, list[Observation]]:
        """Give up on a batch whose worker is gone (or lost it restarting) and send it elsewhere (or to it again):
        (the seconds its new copy may take, on top of the run's timeout; the batch's faults when no worker took
        it)."""
        batch = sent[task_id]
        pending.discard(task_id)
        self.drop(task_id)
        self._abandoned[task_id] = ("late_answer", batch)  # read on: its worker may come back and answer
        again = outbox.send_elsewhere(task_id, batch)
        if again is None:
            detail = "its worker is presumed gone and no other enrolled worker could take it"
            return 0.0, [Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS) for s in batch]
        sent.update(again)
        pending.update(again)
        return sum(spec.deadline_s + 5 for spec in batch) if again else 0.0, []

    def _late(self, task_id: str) -> None:
        """An abandoned batch answered after all: the copy sent elsewhere is the one that counts."""
        if (abandoned := self._abandoned.pop(task_id, None)) is None:
            return  # another gathering said it first
        kind, batch = abandoned
        why = "its worker was given up on" if kind == "late_answer" else "another copy of it was answered"
        detail = f"task {task_id} ({len(batch)} trials) answered after {why}: not counted"
        self.events.append(HarnessEvent(kind=kind, property_id=batch[0].property_id, detail=detail))

    def _ready(self, pending: set[str], timeout: float) -> dict[str, Any]:
        """Task id -> meta of the pending batches that finished, waiting up to `timeout` for the first. Each is
        read from the place of the queue it was sent to (worker.celery.shared.results): a direct queue's results
        from under that queue alone, where no other worker's broker user can write. Abandoned batches are read
        too, so an answer from a worker given up on is seen (and counted nowhere)."""
        keys = {task: result_key(task, self._queue_of.get(task)) for task in pending | self._abandoned.keys()}
        return read_ready(self.app.backend, keys, timeout, self.poll_s)

    def restarted(self, *, strict: bool = False) -> str | None:
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

    def _republish(self, sent: dict[str, list[TrialSpec]], pending: set[str], epoch: str, outbox: Outbox) -> None:
        """The broker restarted empty: upload the tree and fixtures, publish the run's image and send every
        unanswered batch again (new task ids; a result under an old id is ignored). Per batch, so a broker
        that fails again midway leaves the rest for the next look, which still sees the new run id."""
        lost = [task for task in sent if task in pending]
        self.note(f"gate: the broker restarted and lost what it held; sending {len(lost)} batch(es) again")
        outbox.send_inputs_again([sent[task] for task in lost])
        trials = 0
        for task in lost:
            batch = sent[task]
            with broker_call("sending batches again"):
                again = outbox.send_again(batch, self._queue_of.get(task), task)
            sent[again] = batch
            pending.add(again)
            pending.discard(task)
            self.drop(task)
            trials += len(batch)
        self._epoch = epoch
        detail = f"broker restarted empty: {len(lost)} batch(es) ({trials} trials), the tree and the image sent again"
        self.events.append(HarnessEvent(kind="broker_restarted", detail=detail))


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
