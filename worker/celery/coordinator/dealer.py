"""The wave's primary batches on their way out: which wait, which enrolled worker holds which, and the copies sent
of stragglers. The rules are gate.core.trust.dealing's; this keeps the state they are asked about.

A run's primaries are assigned round the workers as before, but not all sent at once: each enrolled worker holds
at most its room (two batches per pool process, so the next one is already in the worker while one runs) and gets
its next as each answer comes back; one whose own turns are all out takes the last turns of the one furthest
behind, so a slow server holds fewer and a fast one never waits on it. Once nothing waits, a worker left idle is
sent a copy of a batch waiting behind another on a worker slower than it, or else of the oldest still out for
longer than the wave's answers took (`copies`; never one side of a pair alone): whichever copy is answered first,
validly, counts, and the other is a `duplicate_answer` event (worker.celery.coordinator.gathering).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

from gate.core.card.card import HarnessEvent
from gate.core.suite.trial import TrialSpec
from gate.core.trust.dealing import ROOM_PER_PROCESS, Out, Seat, deal, room_for, straggler

Batch = list[TrialSpec]
ALL_AT_ONCE = 1_000_000  # room per process that sends a whole wave at once


class Dealer:
    """The waiting turns (a paired property's base and patch batches of the same indices are one), each worker's
    room and holdings, and the copies: every task id sent as a primary -> its worker, batch and send time."""

    def __init__(
        self,
        events: list[HarnessEvent],
        *,
        per_process: int = ROOM_PER_PROCESS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # per_process 0: every batch of a wave at once round the workers, and no copies (`gate run --room 0`).
        self.events, self.per_process, self.clock = events, per_process, clock
        self._lists: dict[str, list[list[Batch]]] = {}  # worker key -> its turns of the round not sent yet
        self._rooms: dict[str, int] = {}
        self._holding: dict[str, set[str]] = {}  # worker key -> its primaries out (copies included)
        self._out: dict[str, tuple[str, Batch, float]] = {}  # task id -> (worker key, batch, sent at)
        self._copies: dict[str, str] = {}  # task id <-> the id of its copy, both ways
        self._tried: dict[str, frozenset[str]] = {}  # task id -> every worker its batch went to
        self._took: list[float] = []  # seconds each answered primary of the wave took from send to answer
        self._pace: dict[str, float] = {}  # worker key -> seconds its last answered primary took
        self._paired: set[int] = set()  # ids of the batches dealt as one side of a pair: never copied alone

    def start(self, turns: Sequence[tuple[str, list[Batch]]], processes: Mapping[str, int]) -> None:
        """A new wave: its turns in order, each with the worker the round assigned it to (a paired property's base
        and patch batches of the same indices are one turn), for the workers `processes` names (worker key -> its
        pool processes)."""
        self._lists = {worker: [] for worker in processes}
        for worker, turn in turns:
            self._lists.setdefault(worker, []).append(turn)
        per = self.per_process or ALL_AT_ONCE
        self._rooms = {worker: room_for(n, per) for worker, n in processes.items()}
        self._took = []

    @property
    def waiting(self) -> int:
        """Batches not sent yet."""
        return sum(len(turn) for turns in self._lists.values() for turn in turns)

    def take_waiting(self) -> list[Batch]:
        """Every batch not sent yet, no longer waiting (no worker is left to take them)."""
        left = [batch for turns in self._lists.values() for turn in turns for batch in turn]
        self._lists = {}
        return left

    def next(self, gone: frozenset[str]) -> list[tuple[Batch, str]]:
        """The batches the workers up have room for now, each with the worker it goes to."""
        seats = [Seat(w, room, len(self._holding.get(w, ()))) for w, room in self._rooms.items() if w not in gone]
        lists = {worker: [len(turn) for turn in turns] for worker, turns in self._lists.items()}
        out: list[tuple[Batch, str]] = []
        for taker, source in deal(lists, seats):
            turn = self._lists[source].pop(0 if taker == source else -1)
            out.extend((batch, taker) for batch in turn)
            if len(turn) > 1:
                self._paired.update(id(batch) for batch in turn)
        return out

    def sent(self, task: str, worker: str, batch: Batch, *, copy_of: str | None = None) -> None:
        """Note primary `task` out on `worker` (`copy_of`: the task it copies)."""
        self._holding.setdefault(worker, set()).add(task)
        self._out[task] = (worker, batch, self.clock())
        self._tried[task] = frozenset({worker})
        if copy_of is not None:
            self._copies[task], self._copies[copy_of] = copy_of, task
            both = self._tried.get(copy_of, frozenset()) | {worker}
            self._tried[task] = self._tried[copy_of] = both

    def done(self, task: str) -> None:
        """`task` is answered, moved or given up on: its worker has room again."""
        if (held := self._out.pop(task, None)) is None:
            return
        worker, _, sent_at = held
        self._holding.get(worker, set()).discard(task)
        self._took.append(self.clock() - sent_at)
        self._pace[worker] = self._took[-1]

    def replaced(self, task: str, again: str) -> None:
        """`task` was sent again as `again` (the broker lost it): the new id holds its place."""
        if (held := self._out.pop(task, None)) is None:
            return
        worker = held[0]
        self._out[again] = held
        self._holding.setdefault(worker, set()).discard(task)
        self._holding[worker].add(again)
        self._tried[again] = self._tried.pop(task, frozenset({worker}))
        if (other := self._copies.pop(task, None)) is not None:
            self._copies[again], self._copies[other] = other, again

    def copy_of(self, task: str) -> str | None:
        """The other copy of `task`'s batch, while it is still out (None: there is none)."""
        other = self._copies.get(task)
        return other if other in self._out else None

    def copies(self, gone: frozenset[str]) -> list[tuple[str, Batch, str]]:
        """Once nothing waits: for each worker up and idle, the batch (its task id and specs) to copy to it. One side
        of a pair is never copied: both sides must come from the same worker."""
        if self.waiting or not self._took or not self.per_process:
            return []
        typical = statistics.median(self._took)
        now = self.clock()
        running = {worker: room // self.per_process for worker, room in self._rooms.items()}
        chosen: list[tuple[str, Batch, str]] = []
        for worker in self._rooms:
            if worker in gone or self._holding.get(worker):
                continue
            taken = {task for task, _, _ in chosen}
            out = [
                Out(task, w, at, self._tried.get(task, frozenset()), copied=task in self._copies or task in taken)
                for task, (w, batch, at) in self._out.items()
                if w not in gone and id(batch) not in self._paired
            ]
            if (task := straggler(out, worker, now, typical, running, self._pace)) is not None:
                chosen.append((task, self._out[task][1], worker))
        return chosen
