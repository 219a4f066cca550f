"""Who runs what: the coordinator assigns each batch to one enrolled worker, so no worker chooses its
own share by answering fastest. Pure: the caller says which workers are enrolled and alive.

Each property's batches go round the workers in turn, and each new property starts one place further
on, so single-batch properties spread too. Across calls (waves) the turns carry on, so a property's
batch counts never differ by more than one between workers. An owned worker has two places in the round
(`OWNED_PLACES`): its results need no replay, so the more of a statistical row it runs, the fewer of the
strangers' hits lie beyond the band's margin (docs/explanation/trust.md, "Statistical replays and their bound").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

OWNED_PLACES = 2  # places an owned worker has in the round, against one for a stranger


@dataclass(frozen=True)
class Rotation:
    """The workers batches go round (key ids, in a fixed order), the owned ones among them, and each property's
    place in the round."""

    workers: tuple[str, ...]
    # property id -> (the place its first batch went to, batches assigned so far)
    turns: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    started: int = 0  # properties started so far: the next one starts at this place
    owned: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.workers:
            raise ValueError("a rotation needs at least one worker")

    @property
    def places(self) -> tuple[str, ...]:
        """The round's places: every worker once, then each owned one again until it has OWNED_PLACES."""
        more = tuple(w for _ in range(OWNED_PLACES - 1) for w in self.workers if w in self.owned)
        return self.workers + more


def assign(rotation: Rotation, properties: Sequence[str]) -> tuple[tuple[str, ...], Rotation]:
    """The worker for each batch (one property id per batch, in order), and the rotation after them."""
    turns = dict(rotation.turns)
    started = rotation.started
    chosen: list[str] = []
    places = rotation.places
    for prop in properties:
        if prop not in turns:
            turns[prop] = (started % len(places), 0)
            started += 1
        first, done = turns[prop]
        chosen.append(places[(first + done) % len(places)])
        turns[prop] = (first, done + 1)
    return tuple(chosen), Rotation(rotation.workers, turns, started, rotation.owned)


def shares(properties: Sequence[str], workers: Sequence[str], sizes: Sequence[int]) -> dict[str, dict[str, int]]:
    """Trials assigned per property and worker, from parallel sequences of each batch's property, worker, size."""
    out: dict[str, dict[str, int]] = {}
    for prop, worker, size in zip(properties, workers, sizes, strict=True):
        row = out.setdefault(prop, {})
        row[worker] = row.get(worker, 0) + size
    return out


def reassign(rotation: Rotation, tried: frozenset[str]) -> str | None:
    """The worker a lost batch goes to next: the first in the round it was not sent to yet (None: all tried).
    Each batch goes to each worker at most once, so a batch no worker answers ends, never circles."""
    return next((worker for worker in rotation.workers if worker not in tried), None)
