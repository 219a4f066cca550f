"""The verdict card: one JSON document that binds a run, and `accept`, which re-derives from it
whether the patch may merge. Both are pure; reading and writing the file is `gate.io.artifacts`.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from gate.core.policy.explain import Explanation
from gate.core.policy.flakes import BaseRerun, FlakeFiles
from gate.core.policy.history import LiftProposal, PairFlake
from gate.core.policy.ledger import LedgerAction, LedgerEntry
from gate.core.policy.policy import JobStatus, PolicyInputs
from gate.core.suite.trial import ClockSpec
from gate.core.trust.crosscheck_summary import CrossCheckSummary
from gate.core.verdicts.bands import Interval
from gate.core.verdicts.verdict import Band, ColourChange, Kind, OutcomeCounts, PairedEvidence

CARD_SCHEMA_VERSION = 2  # 2: outcome counts per row and the policy's inputs, so `accept` can recompute
_CARD = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
# The largest number a card may hold anywhere: every count, index and duration a run writes is far
# below it, and JSON readers elsewhere keep integers exact only up to here (2**53).
MAX_NUMBER = 2**53
RUN_ID = r"^[A-Za-z0-9._-]{1,128}$"  # what `gate run --replay-seeds` takes (a run id the gate made is 32 hex digits)


def bounded_numbers(value: object, where: str = "") -> None:
    """Refuse a number no run writes (NaN, an infinity, beyond ±MAX_NUMBER) anywhere in a card's
    JSON, naming its path: readers (diff, reports, accept's arithmetic) then never overflow."""
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        # The path goes in the error's context: the reader names it as the field (gate.io.artifacts).
        if isinstance(value, float) and not math.isfinite(value):
            raise PydanticCustomError("card_number", "{value} is not a finite number", {"where": where, "value": value})
        if abs(value) > MAX_NUMBER:
            raise PydanticCustomError("card_number", "a number beyond ±2**53 that no run writes", {"where": where})
    elif isinstance(value, dict):
        for key, inner in value.items():
            bounded_numbers(inner, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list | tuple):
        for index, inner in enumerate(value):
            bounded_numbers(inner, f"{where}.{index}" if where else str(index))


class DeadlineSource(StrEnum):
    CALIBRATED = "calibrated"  # backed by a measured p95 of the unpatched tree
    PROPOSAL = "proposal"  # picked by hand; a timeout on it can only be inconclusive


class PropertyRow(BaseModel):
    model_config = _CARD
    id: str
    band: Band
    kind: Kind
    voting: bool
    frozen_by: str | None = None
    ledger: LedgerAction | None = None
    trials: int
    hits: int
    interval: Interval | None = None
    rule: dict[str, object] | None = None
    deadline_s: float
    deadline_source: DeadlineSource = DeadlineSource.PROPOSAL
    timeout_is_safety: bool = False
    fixture: str
    fixture_digest: str
    detail: str = ""
    durations_s: tuple[float, ...] = ()
    counts: OutcomeCounts = OutcomeCounts()
    # A paired row (`rule = "paired"`): the base's trials of the same indices, the pairs and the test's
    # state. `counts`, `trials` and `hits` stay the patched tree's. None for every other rule.
    paired: PairedEvidence | None = None
    colour_change: ColourChange | None = None  # safety/contract trials that disagreed on the same bytes
    # The same trials on the base tree, for a row that changed colour in a run with --base (None: no
    # colour change, or no base to rerun on; a harness event then says why). Never changes the vote.
    base_rerun: BaseRerun | None = None
    # Which worker ran which of the row's counted primary trials: worker id -> trials (the local pool: its sandbox).
    workers: dict[str, int] = {}
    # Trials the coordinator assigned to each enrolled worker by name (primaries; a worker's share is
    # all it can answer). Empty where nobody was assigned: the local pool, or unenrolled workers.
    assigned: dict[str, int] = {}


class HarnessEvent(BaseModel):
    """Something the harness did or suffered that is not a verdict (lost worker, redelivery)."""

    model_config = _CARD
    kind: str
    detail: str
    property_id: str | None = None


class FixtureBinding(BaseModel):
    model_config = _CARD
    root: str
    seal: str
    manifest: dict[str, str]


class VerdictCard(BaseModel):
    """Everything `accept` needs to decide, and everything a reviewer needs to audit."""

    model_config = _CARD
    schema_version: Literal[2] = CARD_SCHEMA_VERSION
    gate_version: str
    run_id: str
    created_at: AwareDatetime  # compared with freezes' and credits' aware expiries
    suite: str
    suite_sha256: str
    workdir: str
    tree_digest: str
    fixture: FixtureBinding
    image: str
    image_id: str
    clock: ClockSpec
    network_mode: str = "none"
    # Trials went over a broker with no worker registry (`gate run --allow-unenrolled-workers`), so any
    # process that could write to the broker could have answered them; `accept` refuses it unless told
    # the same. No default: a card that leaves it out is unreadable, not one of enrolled workers.
    unenrolled_workers: bool
    # The run whose trial seeds this run's trials drew (`gate run --replay-seeds`); None: seeds of its own,
    # from its run id. `accept` refuses a replay unless told the same. No default, as above.
    seeds_from: Annotated[str, Field(pattern=RUN_ID)] | None
    # How the trials' work dirs were made: "overlay" (copy-on-write), "copy", "mixed" (some of each),
    # or None (no trial said: a card from before the modes, or no trial ran). Why copy ran where
    # overlay was wanted is a harness event of kind "work_copy".
    work_copy: Literal["overlay", "copy", "mixed"] | None = None
    # How the probes' Python started: "fresh", "warm" (forked from a pre-imported parent), "mixed", or
    # None (no trial said). In warm mode, how many distinct PYTHONHASHSEEDs (parents) the trials saw;
    # each trial's own is in its record.
    interpreter: Literal["fresh", "warm", "mixed"] | None = None
    hash_seeds: int = Field(0, ge=0)
    retry_count: int = Field(ge=0)
    base_rev: str | None = None
    new_oracle_edits: tuple[str, ...] = ()
    freeze_set: dict[str, str] = {}
    freezes_inactive: dict[str, str] = {}
    properties: tuple[PropertyRow, ...]
    # The properties the run was asked to cover (`gate run -k/--property`); None: the whole suite.
    selection: tuple[str, ...] | None = None
    ledger_actions: tuple[LedgerEntry, ...] = ()
    harness_events: tuple[HarnessEvent, ...] = ()
    policy: PolicyInputs = PolicyInputs(ledger_budget=2, ledger_ttl_s=6 * 3600)
    window_after: tuple[bool, ...] = ()
    status: JobStatus
    exit_code: int
    reasons: tuple[str, ...] = ()
    # sha256 over the digests of every trial record in the evidence store beside the card
    # (`gate.core.card.evidence.evidence_digest`); None: a card from before evidence was kept.
    evidence: str | None = None
    # Files written beside the card for flakes established on the base (freeze proposal, repair task).
    flake_files: FlakeFiles | None = None
    # The nightly pair's flakes: safety/contract properties whose kind differed between its two runs,
    # each with both runs' entries (`gate baseline --twice`; empty on any other card).
    pair_flakes: tuple[PairFlake, ...] = ()
    # What `gate flakes explain` measured of each pair flake: the source that moves it, or why none was named.
    flake_causes: tuple[Explanation, ...] = ()
    # Freezes whose property passed enough recorded runs in a row to be lifted (`gate baseline --twice`).
    lift_proposals: tuple[LiftProposal, ...] = ()
    # What the run added to the flake history for its frozen properties, or why it added nothing (only
    # runs on the base's own tree count, `gate.run.runhistory`); "" when no property was frozen.
    flake_history: str = ""
    # Trials run again on a second worker, and what the pairs showed (None: a card from before them).
    cross_check: CrossCheckSummary | None = None

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        bounded_numbers(data)
        return data


class Acceptance(BaseModel):
    model_config = _CARD
    accepted: bool
    reasons: tuple[str, ...]


_CREDITED = (LedgerAction.OPENED, LedgerAction.CONSUMED)


def accept(card: VerdictCard, seal_digest: str) -> Acceptance:
    """Accept only a zero-retry, sealed, oracle-clean run in which every voting property passed."""
    reasons: list[str] = []
    if card.retry_count != 0:
        reasons.append(f"retry_count is {card.retry_count}; the gate accepts first runs only")
    if card.fixture.seal != seal_digest:
        reasons.append(f"card seal {card.fixture.seal[:16]} does not match seal file {seal_digest[:16]}")
    if card.new_oracle_edits:
        reasons.append(f"the patch edits oracle files: {', '.join(card.new_oracle_edits)}")
    if card.network_mode != "none":
        reasons.append(f"probes ran with network_mode {card.network_mode!r}")
    if card.exit_code != 0:
        reasons.append(f"the job ended {card.status} (exit {card.exit_code})")
    if not card.properties:
        reasons.append("the card has no property rows")
    kept = _undiscarded(card)
    if kept:
        # A caught worker's other, unchecked results are no evidence either: unless every one of them was
        # discarded and run again elsewhere (`gate.core.trust.replay`, rule 4), the run is refused.
        reasons.append(
            f"a deterministic rerun contradicted worker(s) {', '.join(kept)}: their results are not evidence"
        )
    voting = 0
    for row in card.properties:
        if not row.voting:
            why = _unvoted_reason(card, row)
            if why:
                reasons.append(why)
            continue
        voting += 1
        if row.kind is not Kind.PASS:
            reasons.append(f"{row.id}: {row.kind}" + (f" ({row.detail})" if row.detail else ""))
    if card.properties and voting == 0:
        reasons.append("no property voted")
    return Acceptance(accepted=not reasons, reasons=tuple(reasons) or ("every voting property passed",))


def _undiscarded(card: VerdictCard) -> list[str]:
    """Workers a tie-break caught whose results the run did not discard and run again elsewhere."""
    if card.cross_check is None:
        return []
    return sorted(set(card.cross_check.quarantined) - set(card.cross_check.discarded))


def _unvoted_reason(card: VerdictCard, row: PropertyRow) -> str | None:
    """Why a row's abstention is not justified by the card itself, or None when it is."""
    if row.band is Band.SAFETY:
        return f"{row.id}: safety property did not vote; safety can never be frozen"
    if row.frozen_by is not None:
        if card.freeze_set.get(row.id) != row.frozen_by:
            return f"{row.id}: frozen by {row.frozen_by}, which is not in the card's freeze set"
        return None
    if row.kind is Kind.HARNESS_ERROR and row.ledger in _CREDITED:
        return None
    return f"{row.id}: did not vote without a freeze or a harness credit"
