"""A property across runs, and the flakes: the rows one property has on every listed card (oldest
first), the freezes of the suite's freeze file with their state, and what the books recorded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from gate.core.errors import GateError
from gate.core.escaping import one_line
from gate.core.policy.freezes import FreezeEntry, FreezeFile
from gate.core.policy.history import History, HistoryEntry
from gate.core.report.html import row_interval
from gate.view.cards import CardCache, Proposals, read_proposals
from gate.view.index import RunSummary

T = TypeVar("T")


@dataclass(frozen=True)
class PropertyPoint:
    """One property's row on one card."""

    run: RunSummary
    kind: str
    band: str
    trials: int
    hits: int
    low: float
    high: float
    voting: bool
    frozen_by: str
    colour_change: bool
    cause: str

    @property
    def rate(self) -> float | None:
        return self.hits / self.trials if self.trials > 0 else None


def property_points(runs: list[RunSummary], cards: CardCache, property_id: str) -> tuple[list[PropertyPoint], int]:
    """The property's row on each card naming it, oldest first, and how many such cards could not be read."""
    points: list[PropertyPoint] = []
    unreadable = 0
    for run in reversed(runs):  # the listing is newest first
        if property_id not in run.properties:
            continue
        try:
            card = cards.card(run)
        except GateError:
            unreadable += 1
            continue
        causes = {c.property_id: c.words or c.source for c in card.flake_causes}
        for row in card.properties:
            if row.id != property_id:
                continue
            interval = row_interval(row)
            points.append(
                PropertyPoint(
                    run=run,
                    kind=str(row.kind),
                    band=str(row.band),
                    trials=row.trials,
                    hits=row.hits,
                    low=interval.low,
                    high=interval.high,
                    voting=row.voting,
                    frozen_by=row.frozen_by or "",
                    colour_change=row.colour_change is not None,
                    cause=causes.get(property_id, ""),
                )
            )
            break
    return points, unreadable


def proposals_for(runs: list[RunSummary], property_id: str | None = None) -> list[Proposals]:
    """The flake files beside each card folder (of cards naming `property_id`, when given) that holds any."""
    folders = dict.fromkeys(run.path.parent for run in runs if property_id is None or property_id in run.properties)
    found = [read_proposals(folder) for folder in folders]
    return [p for p in found if p.freezes or p.repair_task or p.lift_note or p.problem]


@dataclass(frozen=True)
class FreezeRow:
    """A freeze file entry and whether it freezes anything now."""

    entry: FreezeEntry
    state: str  # "active", "no owner" (freezes nothing), "expired"


def freeze_rows(freeze_file: FreezeFile | None, now: datetime | None = None) -> list[FreezeRow]:
    """Every entry of the freeze file with its state, soonest expiry first."""
    if freeze_file is None:
        return []
    moment = now or datetime.now(UTC)
    rows = []
    for entry in freeze_file.freezes:
        state = "expired" if entry.expires_at <= moment else "active" if entry.owner else "no owner"
        rows.append(FreezeRow(entry, state))
    return sorted(rows, key=lambda row: row.entry.expires_at)


@dataclass(frozen=True)
class Read(Generic[T]):
    """What a source gave, or why it gave nothing."""

    value: T | None = None
    problem: str = ""


def read_source(reader: Callable[[], T | None] | None) -> Read[T]:
    """Call a source's reader; a GateError becomes the page's one line about it."""
    if reader is None:
        return Read()
    try:
        return Read(value=reader())
    except GateError as exc:
        return Read(problem=one_line(str(exc)))


def history_of(history: History | None, property_id: str) -> tuple[HistoryEntry, ...]:
    """The books' recorded runs of the property, oldest first."""
    return history.of(property_id) if history is not None else ()
