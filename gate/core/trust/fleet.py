"""The fleet as `gate workers status` shows it: each enrolled worker's registry entry beside what the broker
says of it now (its heartbeat) and what the last card says it did (disputes, caught). Pure: the caller reads the
broker and the card. A worker's heartbeat fields are its own word and only ever displayed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from gate.core.trust.crosscheck_summary import CrossCheckSummary
from gate.core.trust.enrolment import Roster
from gate.core.trust.invites import InviteBook

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Beat(BaseModel):
    """What the broker holds of one worker now: whether its heartbeat is live, when it last beat (the broker's
    clock; None: never, or too long ago to tell), and its own word on its load."""

    model_config = _FROZEN
    up: bool
    last_seen: datetime | None = None
    in_flight: int | None = None
    trials_last_minute: int | None = None


class WorkerStatus(BaseModel):
    """One row of `gate workers status`."""

    model_config = _FROZEN
    name: str
    key_id: str
    tier: str  # "owned" or "stranger"
    state: str  # "up", "gone" or "revoked"
    last_seen: datetime | None
    in_flight: int | None
    trials_last_minute: int | None
    disputes: int | None  # disagreements naming it on the card read (None: no card read)
    caught: bool | None


class InviteStatus(BaseModel):
    """The invites still open: how many, and how many servers they may still admit."""

    model_config = _FROZEN
    open: int
    uses_left: int


def fleet(
    roster: Roster, beats: Mapping[str, Beat], summary: CrossCheckSummary | None, *, read_card: bool
) -> list[WorkerStatus]:
    """Every enrolled worker (revoked ones too, last), by name; `beats` by key id, `summary` the card's."""
    rows = []
    for worker in sorted(roster.workers, key=lambda w: (not w.active, w.name)):
        beat = beats.get(worker.key_id) or Beat(up=False)
        state = "revoked" if not worker.active else ("up" if beat.up else "gone")
        disputes = caught = None
        if read_card:
            named = summary.disagreements if summary is not None else ()
            disputes = sum(1 for d in named if worker.name in (side.worker for side in d.sides))
            caught = summary is not None and worker.name in (*summary.quarantined, *summary.discarded)
        rows.append(
            WorkerStatus(
                name=worker.name,
                key_id=worker.key_id,
                tier="owned" if worker.owned else "stranger",
                state=state,
                last_seen=beat.last_seen,
                in_flight=beat.in_flight if beat.up else None,
                trials_last_minute=beat.trials_last_minute if beat.up else None,
                disputes=disputes,
                caught=caught,
            )
        )
    return rows


def invites_open(book: InviteBook, now: datetime) -> InviteStatus:
    """How many invites are open at `now` and how many joins they still allow."""
    still = [i for i in book.invites if i.state(now) == "open"]
    return InviteStatus(open=len(still), uses_left=sum(i.uses - len(i.admitted) for i in still))
