"""The harness-credit ledger: a small, expiring quota of forgiveness for the gate's own faults.

Only a `harness_error` may draw a credit, and never on a safety property. A property starts
with `budget` credits; the first fault opens a slot that expires after `ttl`, each fault spends
one, and a fault with none left is `exhausted` (the job fails with exit 2). The ledger records
the property, what remains, the expiry and the last fault's detail — never the word "flaky".
Time is a parameter: nothing here reads a clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

# The most a suite may grant ([suite.ledger] budget and ttl_hours in gate.core.suite.suite); a card or the
# books claiming more were not written by a run of any suite.
MAX_BUDGET = 100
MAX_TTL = timedelta(days=30)
# The latest instant an expiry can name: `now + ttl` past it saturates here instead of overflowing.
END_OF_TIME = datetime.max.replace(tzinfo=UTC)


class LedgerAction(StrEnum):
    OPENED = "freeze_opened"  # first fault in a fresh slot; one credit spent
    CONSUMED = "freeze_consumed"  # a later fault inside the slot's lifetime; one credit spent
    EXHAUSTED = "freeze_exhausted"  # no credit left: the harness is broken, not the patch


class Credit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    property_id: str
    remaining: int = Field(ge=0, le=MAX_BUDGET)
    # Aware only: a naive expiry read back from the ledger file cannot be compared with the run's clock.
    expires_at: AwareDatetime
    last_detail: str


class LedgerEntry(BaseModel):
    """One ledger action taken in a run, as it goes on the card."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    property_id: str
    action: LedgerAction
    remaining: int = Field(ge=0, le=MAX_BUDGET)
    expires_at: AwareDatetime
    detail: str


class Ledger(BaseModel):
    """Credits by property id, plus the budget and lifetime every new slot starts with."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    budget: int = Field(2, ge=0, le=MAX_BUDGET)
    ttl: timedelta = Field(timedelta(hours=6), gt=timedelta(0), le=MAX_TTL)
    credits: dict[str, Credit] = {}

    def draw(self, property_id: str, detail: str, now: datetime) -> tuple[Ledger, LedgerEntry]:
        """Spend one credit for a harness fault at `now`; returns the new ledger and what happened."""
        slot = self.credits.get(property_id)
        if slot is None or slot.expires_at <= now:
            if self.budget <= 0:
                return self, _entry(property_id, LedgerAction.EXHAUSTED, 0, now, detail)
            slot = Credit(
                property_id=property_id,
                remaining=self.budget - 1,
                expires_at=expiry(now, self.ttl),
                last_detail=detail,
            )
            action = LedgerAction.OPENED
        elif slot.remaining <= 0:
            slot = slot.model_copy(update={"last_detail": detail})
            action = LedgerAction.EXHAUSTED
        else:
            slot = slot.model_copy(update={"remaining": slot.remaining - 1, "last_detail": detail})
            action = LedgerAction.CONSUMED
        updated = self.model_copy(update={"credits": {**self.credits, property_id: slot}})
        return updated, _entry(property_id, action, slot.remaining, slot.expires_at, detail)

    def pruned(self, now: datetime) -> Ledger:
        """The ledger without slots that expired by `now` (they would reopen fresh anyway)."""
        live = {k: v for k, v in self.credits.items() if v.expires_at > now}
        return self.model_copy(update={"credits": live})


def expiry(now: datetime, ttl: timedelta) -> datetime:
    """`now + ttl`, saturated at the end of datetime's range (a card dated 9999-12-31 is read, not a crash)."""
    try:
        return now + ttl
    except OverflowError:
        return END_OF_TIME


def _entry(pid: str, action: LedgerAction, remaining: int, expires: datetime, detail: str) -> LedgerEntry:
    return LedgerEntry(property_id=pid, action=action, remaining=remaining, expires_at=expires, detail=detail)
