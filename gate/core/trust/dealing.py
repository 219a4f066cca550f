"""Dealing batches by room: each wave's batches are assigned round the enrolled workers (gate.core.trust.assignment)
but sent only as each worker has room, and a worker whose own turns are all out takes the last turns of the one
furthest behind, so a slow server holds fewer batches and a fast one never waits on it. Pure: the caller says
which workers are up, how much each may hold and what each holds now.

The coordinator still chooses: a worker never picks its batches, and answering fast only earns it more of them
when it has room, a share the cross-check and replay rules are indifferent to (their bounds hold per trial and
per worker, docs/explanation/trust.md). Near the end of a wave a batch still out on one worker may be copied to an
idle one (`straggler`): the first valid answer counts, the other is an event.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ROOM_PER_PROCESS = 2  # one batch running and one waiting in the worker, so no round trip falls between them
MAX_PROCESSES = 16  # a worker's process count is its own word: it earns it no more room than this


def room_for(processes: int, per_process: int = ROOM_PER_PROCESS) -> int:
    """How many batches a worker reporting `processes` pool processes may hold at once, `per_process` each."""
    return per_process * min(max(1, processes), MAX_PROCESSES)


@dataclass(frozen=True)
class Seat:
    """One worker up for dealing: its key, the batches it may hold and those it holds now."""

    worker: str
    room: int
    holding: int = 0

    @property
    def free(self) -> int:
        return max(0, self.room - self.holding)


def deal(lists: Mapping[str, Sequence[int]], seats: Sequence[Seat]) -> tuple[tuple[str, str], ...]:
    """The turns to send now, in order, each as (the worker it goes to, the worker whose list it comes off).
    `lists`: each worker's turns of the round not sent yet, by size (a paired property's base and patch batches
    of the same indices go together), workers without a seat (gone) included. Seats take turns one at a time:
    a worker with room takes the head of its own list, or, its list empty, the tail of the longest list of
    another that holds two or more (a gone worker's first, to the last: a worker up keeps its last turn)."""
    left = {worker: list(sizes) for worker, sizes in lists.items()}
    free = {seat.worker: seat.free for seat in seats}
    rooms = {seat.worker: seat.room for seat in seats}
    seated = {seat.worker for seat in seats}
    chosen: list[tuple[str, str]] = []
    moved = True
    while moved:
        moved = False
        for seat in seats:
            worker = seat.worker
            donors = [w for w in left if w != worker and (len(left[w]) > 1 or (w not in seated and left[w]))]
            if left.get(worker):
                source, index = worker, 0
            elif donors:
                source, index = max(donors, key=lambda w: (w not in seated, len(left[w]), w)), -1
            else:
                continue
            size = left[source][index]
            # A turn larger than a worker's whole room still goes to it once it holds nothing.
            if free[worker] < min(size, rooms[worker]) or free[worker] == 0:
                continue
            left[source].pop(index)
            free[worker] -= size
            chosen.append((worker, source))
            moved = True
    return tuple(chosen)


@dataclass(frozen=True)
class Out:
    """A primary batch out on a worker: its id, its worker, when it was sent, the workers it went to, and whether
    a copy of it is out already."""

    task: str
    worker: str
    sent_at: float
    tried: frozenset[str]
    copied: bool = False


SLOWER = 1.5  # a worker this much slower than an idle one has its waiting batches copied at once


def straggler(
    out: Sequence[Out],
    idle: str,
    now: float,
    typical_s: float,
    running: Mapping[str, int],
    took: Mapping[str, float],
) -> str | None:
    """The batch to copy to idle worker `idle` (None: none), never one of its own or one sent to it before. First
    a batch waiting behind another on a worker slower than `idle` (holding more than its `running` pool processes
    run at once; `took`: each worker's seconds from send to answer, lately), the newest: it would finish last;
    else the oldest out past `typical_s` (how long an answered batch of the wave took from send to answer)."""
    held = Counter(o.worker for o in out)
    mine = [o for o in out if o.worker != idle and idle not in o.tried and not o.copied]
    pace = took.get(idle)
    slower = {w for w, s in took.items() if pace is not None and s > SLOWER * pace}
    waiting = [o for o in mine if held[o.worker] > running.get(o.worker, 1) and o.worker in slower]
    if waiting:
        return max(waiting, key=lambda o: (o.sent_at, o.task)).task
    late = [o for o in mine if now - o.sent_at > typical_s]
    return min(late, key=lambda o: (o.sent_at, o.task)).task if late else None
