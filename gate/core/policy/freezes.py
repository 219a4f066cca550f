"""Flake freezes: a reviewed file that takes properties out of the vote, never out of the run.

An entry names the seal the flake was seen under, an expiry and an owner; it applies only while all
three hold: an entry with no owner is a quarantine nobody will lift, so it freezes nothing.
`retry_allowed` exists in the file so that a reviewer sees it, and it can only be false. A safety
property can never be frozen: such a file is refused outright. The freeze file is an oracle file,
so a patch that edits it is rejected (freeze and feature land as two commits). `accept` checks the
freezes a card's vote depends on again at its own time (`dependent_freeze_reasons`): a freeze that
expired between run and merge no longer excuses anything.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from gate.core.errors import FreezeFileError
from gate.core.verdicts.verdict import Band


class FreezeEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    freeze_id: str = Field(min_length=1)
    properties: tuple[str, ...] = Field(min_length=1)
    seal: str = Field(pattern=r"^[0-9a-f]{64}$")
    reason: str = Field(min_length=1)
    expires_at: AwareDatetime
    # When the freeze was proposed (the run that found the flake): the lift streak counts only runs after
    # it. Entries written before this field existed leave it out, and their streak starts after the
    # last non-pass, as it always did.
    created_at: AwareDatetime | None = None
    # Who repairs the property and lifts the freeze; empty in a proposal until a person takes it.
    owner: str = Field("", max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")
    retry_allowed: Literal[False] = False
    # The measured cause (`gate flakes explain`): a source such as "hash_seed", "trial_seed+hash_seed" or
    # "residual"; empty when none was measured. Reported across the suite by the nightly pair.
    cause: str = Field("", max_length=100, pattern=r"^[a-z_+]*$")


class FreezeFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    freezes: tuple[FreezeEntry, ...] = ()


class FreezeState(BaseModel):
    """Which properties are frozen for this run, and which entries were skipped and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    frozen: dict[str, str] = {}  # property id -> freeze id
    inactive: dict[str, str] = {}  # freeze id -> why it does not apply


def resolve(
    freeze_file: FreezeFile | None,
    *,
    bands: Mapping[str, Band],
    seal: str,
    now: datetime,
    source: str = "freeze file",
) -> FreezeState:
    """Apply the freeze file to this run: refuse safety freezes, skip expired or foreign-seal ones."""
    if freeze_file is None:
        return FreezeState()
    check_properties(freeze_file, bands=bands, source=source)
    frozen: dict[str, str] = {}
    inactive: dict[str, str] = {}
    for entry in freeze_file.freezes:
        if entry.expires_at <= now:
            inactive[entry.freeze_id] = f"expired at {entry.expires_at.isoformat()}"
        elif not entry.owner.strip():
            inactive[entry.freeze_id] = "it has no owner"
        elif entry.seal != seal:
            inactive[entry.freeze_id] = f"observed under seal {entry.seal[:16]}, run is {seal[:16]}"
        else:
            for pid in entry.properties:
                frozen.setdefault(pid, entry.freeze_id)
    return FreezeState(frozen=frozen, inactive=inactive)


def check_properties(freeze_file: FreezeFile, *, bands: Mapping[str, Band], source: str = "freeze file") -> None:
    """Refuse a file naming a property the suite lacks, a safety property (never frozen), or an entry
    created at or after its own expiry (a typo that would hide the streak a lift needs)."""
    for index, entry in enumerate(freeze_file.freezes):
        if entry.created_at is not None and entry.created_at >= entry.expires_at:
            raise FreezeFileError(
                f"freeze {entry.freeze_id} is created at {entry.created_at.isoformat()}, not before it expires"
                f" at {entry.expires_at.isoformat()}",
                file=source,
                field=f"freezes.{index}.created_at",
            )
        for pid in entry.properties:
            if pid not in bands:
                raise FreezeFileError(f"freeze {entry.freeze_id} names unknown property {pid}", file=source)
            if bands[pid] is Band.SAFETY:
                raise FreezeFileError(
                    f"freeze {entry.freeze_id} names safety property {pid}; safety is never frozen",
                    file=source,
                )


def created(freeze_file: FreezeFile | None, frozen: Mapping[str, str]) -> dict[str, datetime]:
    """When each frozen property's freeze (`frozen`: property id -> freeze id) was created, where its
    entry says: the lift streak counts only runs after that."""
    entries = {entry.freeze_id: entry for entry in (freeze_file.freezes if freeze_file else ())}
    found = {}
    for pid, fid in frozen.items():
        entry = entries.get(fid)
        if entry is not None and entry.created_at is not None:
            found[pid] = entry.created_at
    return found


def dependent_freeze_reasons(
    freeze_file: FreezeFile | None, *, frozen: Mapping[str, str], excused: Collection[str], now: datetime
) -> list[str]:
    """Why the freezes that excuse `excused` (frozen properties that did not pass) cannot be relied on at
    `now`, when `accept` runs: an entry missing from the file, expired, or with no owner."""
    entries = {entry.freeze_id: entry for entry in (freeze_file.freezes if freeze_file else ())}
    reasons = []
    for pid in sorted(set(excused) & set(frozen)):
        entry = entries.get(frozen[pid])
        why = f"property {pid}'s vote depends on freeze {frozen[pid]}"
        if entry is None:
            reasons.append(f"{why}, which the freeze file does not hold")
        elif entry.expires_at <= now:
            reasons.append(f"{why}, which expired at {entry.expires_at.isoformat()} (accept ran at {now.isoformat()})")
        elif not entry.owner.strip():
            reasons.append(f"{why}, which has no owner")
    return reasons
