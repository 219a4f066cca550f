"""Who runs what under a worker registry: the coordinator, not the workers, decides which enrolled worker
answers each batch (gate.core.trust.assignment).

`Assigner` keeps the round of enrolled workers that are up, the key each batch was sent to (only that key's
signature counts for it, worker.celery.coordinator.answers), the trials each worker was given per run and property (the
card's shares), and moves a lost batch's share when it goes to another enrolled worker. Every batch goes to
an enrolled worker's direct queue, never to the shared queue; both sides of a paired property's pairs go to
the same one. Without a roster it assigns nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gate.core.card.card import HarnessEvent
from gate.core.suite.trial import Side, TrialSpec
from gate.core.trust.assignment import Rotation, assign, reassign
from gate.core.trust.enrolment import Roster
from worker.celery.shared.app import direct_queue


def pair_of(batch: Sequence[TrialSpec]) -> tuple[str, str, tuple[int, ...]]:
    """What a batch's turn in the round is: its run, property and trial indices, whichever tree it runs on
    (the batching rule chunks a paired wave's base and patch trials alike, index for index)."""
    return batch[0].run_id, batch[0].property_id, tuple(spec.trial_index for spec in batch)


class Assigner:
    """The round batches are assigned in under `roster` (the registry as read for the run; None: no roster),
    every batch id sent to a direct queue -> the key meant to answer it, and the per-run shares."""

    def __init__(self, events: list[HarnessEvent]) -> None:
        self.events = events
        self.roster: Roster | None = None
        self._rotation: Rotation | None = None
        self._keys: dict[str, str] = {}  # batch id -> the key meant to answer it
        self._tried: dict[str, frozenset[str]] = {}  # batch id -> every key it (or the batch it replaced) went to
        self._assignments: dict[str, dict[str, dict[str, int]]] = {}  # run id -> property -> worker name -> trials
        self._lone: set[tuple[str, str]] = set()  # (run id, property) already said to rest on one worker
        self._primary: set[str] = set()  # batch ids that carry a row's share (not cross-checks or replays)
        self._said_gone: set[str] = set()  # keys already said to be presumed gone

    @property
    def assigning(self) -> bool:
        """Whether batches are assigned to enrolled workers (a roster is in force and some are up)."""
        return self._rotation is not None

    @property
    def workers(self) -> tuple[str, ...]:
        """The key ids of the round (empty when nothing is assigned)."""
        return self._rotation.workers if self._rotation is not None else ()

    def rotate(self, fleet: frozenset[str], queue: str, gone: frozenset[str] = frozenset()) -> str | None:
        """Set the round of enrolled workers batches are assigned to (None without a roster); the fault
        detail when a roster is in force but no enrolled worker on our queue has a direct queue up
        (`fleet`: the direct queues consumed by the workers on `queue`; `gone`: keys presumed gone)."""
        if self.roster is None:
            self._rotation = None
            return None
        active = sorted((w for w in self.roster.workers if w.active), key=lambda w: w.name)
        alive = tuple(w.key_id for w in active if direct_queue(w.key_id) in fleet and w.key_id not in gone)
        if not alive:
            detail = f"no enrolled worker's direct queue is consumed on queue {queue}"
            self.events.append(HarnessEvent(kind="no_enrolled_worker", detail=detail))
            return detail
        owned = frozenset(w.key_id for w in active if w.owned) & frozenset(alive)
        if self._rotation is None or (self._rotation.workers, self._rotation.owned) != (alive, owned):
            self._rotation = Rotation(alive, owned=owned)
        return None

    def targets(
        self, groups: Sequence[list[TrialSpec]], queue: str | None, shared: str
    ) -> list[tuple[str, str | None]]:
        """Each batch's queue and the key meant to answer it (None: whoever consumes the queue). `queue`: one
        chosen worker's direct queue (a cross-check, a moved batch); `shared`: where batches go when nothing is
        assigned. Assigned primaries are dealt instead (worker.celery.coordinator.dealer)."""
        if queue is not None:  # a cross-check, sent to one chosen worker's direct queue
            return [(queue, self._key_of(queue))] * len(groups)
        return [(shared, None)] * len(groups)  # nothing assigned (no roster): whoever consumes the shared queue

    def plan(self, groups: Sequence[list[TrialSpec]]) -> list[tuple[str, list[list[TrialSpec]]]]:
        """A wave's turns in order, each with the enrolled worker the round assigns it to. A paired property's base
        batch and the patch batch of the same indices are one turn: both sides of every pair go to the same worker,
        so a slow or noisy worker hits them alike. Every batch is assigned, not only statistical ones: a worker
        taking safety or contract batches off the shared queue would choose which trials it answers."""
        assert self._rotation is not None
        turns: dict[tuple[str, str, tuple[int, ...]], list[list[TrialSpec]]] = {}
        for batch in groups:
            turns.setdefault(pair_of(batch), []).append(batch)
        chosen, self._rotation = assign(self._rotation, [key[1] for key in turns])
        return list(zip(chosen, turns.values(), strict=True))

    def dealt(self, groups: Sequence[list[TrialSpec]], keys: Sequence[str]) -> None:
        """Note primaries dealt to enrolled workers (worker.celery.coordinator.dealer): the card's shares."""
        self._note_shares(groups, keys)

    def copied(self, task_id: str, copy: str) -> None:
        """Batch `copy` is a straggler's copy of `task_id`: neither goes to a worker the other went to, should
        either move."""
        both = self._tried.get(task_id, frozenset()) | self._tried.get(copy, frozenset())
        self._tried[task_id] = self._tried[copy] = both

    def won(self, task_id: str, other: str, batch: Sequence[TrialSpec]) -> None:
        """Of a batch sent twice, `task_id`'s answer counts and `other`'s does not: the share follows the answer."""
        if task_id in self._primary:
            return
        self._primary.add(task_id)
        self._primary.discard(other)
        self._move_share(batch, self.name_of(self._keys.get(other)), self.name_of(self._keys.get(task_id)))

    def name_of(self, key_id: str | None) -> str:
        """The enrolled name of `key_id` (a prefix of the key when it is not enrolled)."""
        worker = self.roster.by_key(key_id) if self.roster is not None and key_id else None
        return worker.name if worker is not None else (key_id or "?")[:16]

    def sent(self, task_id: str, key_id: str, *, primary: bool) -> None:
        """Note that batch `task_id` went to `key_id`'s direct queue: only this key's signature counts for it
        (`primary`: it carries a row's share, as opposed to a cross-check or replay)."""
        self._keys[task_id] = key_id
        self._tried[task_id] = frozenset({key_id})
        if primary:
            self._primary.add(task_id)

    def avoid(self, task_ids: Iterable[str], keys: Iterable[str]) -> None:
        """Batches `task_ids` must never go to `keys` (the workers a cross-check is checking), should they move."""
        for task_id in task_ids:
            self._tried[task_id] = self._tried.get(task_id, frozenset()) | frozenset(keys)

    def primary(self, task_id: str) -> bool:
        """Whether batch `task_id` carries a row's share."""
        return task_id in self._primary

    def first_gone(self, key_id: str) -> bool:
        """Whether `key_id` is presumed gone for the first time (so it is said once)."""
        if key_id in self._said_gone:
            return False
        self._said_gone.add(key_id)
        return True

    def key(self, task_id: str) -> str | None:
        """The key meant to answer batch `task_id` (None: it was not assigned)."""
        return self._keys.get(task_id)

    def assigned(self, run_id: str) -> dict[str, dict[str, int]]:
        """Trials the coordinator assigned in run `run_id`: property id -> enrolled name -> trials (primaries
        only; empty without a roster, where batches go to the shared queue)."""
        return {prop: dict(names) for prop, names in self._assignments.get(run_id, {}).items()}

    def next_key(self, task_id: str, gone: frozenset[str] = frozenset()) -> str | None:
        """For lost batch `task_id`, the next enrolled worker of the round it was not sent to (each worker at most
        once per batch, counting the batches it replaced) and not presumed gone; None when there is none."""
        if self._rotation is None:
            return None
        return reassign(self._rotation, self._tried.get(task_id, frozenset()) | gone)

    def moved(self, task_id: str, batch: Sequence[TrialSpec], key_id: str, resent: Iterable[str]) -> None:
        """Lost batch `task_id` was sent to `key_id` instead, as the batches `resent`: they count every key tried
        before, its share moves and an event says so."""
        assert self.roster is not None
        tried = self._tried.pop(task_id, frozenset()) | {key_id}
        resent = list(resent)
        self._tried.update(dict.fromkeys(resent, tried))
        primary = task_id in self._primary
        if primary:
            self._primary.discard(task_id)
            self._primary.update(resent)
        old, new = self.name_of(self._keys.get(task_id)), self.name_of(key_id)
        if primary:
            self._move_share(batch, old, new)
        detail = f"task {task_id} ({len(batch)} trials) never came back from {old!r}: sent to {new!r}"
        self.events.append(HarnessEvent(kind="batch_reassigned", property_id=batch[0].property_id, detail=detail))

    def _key_of(self, queue: str) -> str | None:
        """The enrolled key whose direct queue `queue` is (None without a roster, or for no enrolled key)."""
        workers = self.roster.workers if self.roster is not None else ()
        return next((w.key_id for w in workers if w.active and direct_queue(w.key_id) == queue), None)

    def _note_shares(self, groups: Sequence[list[TrialSpec]], keys: Sequence[str]) -> None:
        """Count each assigned batch's trials by enrolled name; say once per property when it rests on one worker."""
        assert self.roster is not None and self._rotation is not None
        for batch, key in zip(groups, keys, strict=True):
            run_id, prop = batch[0].run_id, batch[0].property_id
            name = self.name_of(key)
            row = self._assignments.setdefault(run_id, {}).setdefault(prop, {})
            if batch[0].side is Side.PATCH:  # the row's trials, as its `workers`: a pair's base side went alike
                row[name] = row.get(name, 0) + len(batch)
            if len(self._rotation.workers) == 1 and (run_id, prop) not in self._lone:
                self._lone.add((run_id, prop))
                detail = f"every batch went to {name!r}, the only enrolled worker up: the row rests on one worker"
                self.events.append(HarnessEvent(kind="one_worker", property_id=prop, detail=detail))

    def _move_share(self, batch: Sequence[TrialSpec], old: str, new: str) -> None:
        """Count a reassigned batch's trials under the worker it went to instead of the one that lost it."""
        if batch[0].side is not Side.PATCH:
            return
        row = self._assignments.setdefault(batch[0].run_id, {}).setdefault(batch[0].property_id, {})
        row[old] = row.get(old, 0) - len(batch)
        if row[old] <= 0:
            del row[old]
        row[new] = row.get(new, 0) + len(batch)
