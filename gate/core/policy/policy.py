"""The decision table: verdicts in, one job status and exit code out.

    event                                   verdict                 freeze?          job exit
    the patch edits oracle files            (refused by accept)     never            1
    extra write / secret in output          fail_safety             never            1
    contract miss on the locked digest      fail_contract           never by credit  1
    hits below the band                     inconclusive_sample     never            3 if the window trips
    deadline fired                          inconclusive_timeout    never            — (0)
    a check raises on the patch's output    a miss (by band)        never            as the band
    a fault the patched tree caused         a miss (by band)        never            as the band
    harness fault, credit left              harness_error           a credit         — (0)
    harness fault, credits exhausted        harness_error           no               2
    harness fault on a safety property      harness_error           never            2
    fault not proven outside the patch      harness_error           never            2
    faults on > max_fault_share of props    harness_error           none drawn       2
    > max inconclusive_sample in window     sampler_budget_exceeded never            3

A credit is for a fault in one place: when more than one and more than `max_fault_share` of the
voting properties hit harness faults, the harness itself is broken and no credit is drawn at all. The first two rows are
decided where trials are judged (`gate.core.checks.judge`); the rest here.

Precedence when several rows fire: 1 over 2 over 3. A property under an active flake freeze still
ran and keeps its verdict, but does not vote, draw credits or count in the window. A credited
harness_error does not vote either (that is what the credit buys). Exit 0 only means nothing
blocked the job; merging additionally needs `accept`, which wants every voting row to pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import RET_BLOCKED, RET_HARNESS, RET_OK, RET_SAMPLER
from gate.core.policy.ledger import MAX_BUDGET, MAX_TTL, Credit, Ledger, LedgerAction, LedgerEntry
from gate.core.verdicts.bands import SamplerWindow
from gate.core.verdicts.verdict import Band, Kind, Verdict


class JobStatus(StrEnum):
    ACCEPTED = "accepted"  # every voting property passed
    INCONCLUSIVE = "inconclusive"  # nothing blocks the job, but not every voting property passed
    BLOCKED = "blocked"  # the patch broke a safety or contract property
    HARNESS_BROKEN = "harness_broken"  # the gate could not observe and has no credit left
    SAMPLER_BUDGET_EXCEEDED = "sampler_budget_exceeded"  # too many inconclusive samples in the window


class Vote(BaseModel):
    """How one verdict counted: whether it voted, and why not if it did not."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    property_id: str
    kind: Kind
    voting: bool
    frozen_by: str | None = None  # flake-freeze id
    ledger: LedgerAction | None = None


class PolicyInputs(BaseModel):
    """What `decide` was given besides the verdicts, as the card records it: with these, `accept`
    re-runs the same decision instead of believing the card's status."""

    # Bounded as a suite bounds them (gate.core.suite.suite.LedgerConfig): a card holding more was edited,
    # and `ledger()` must build from whatever the card reader let through.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    ledger_budget: int = Field(ge=0, le=MAX_BUDGET)
    ledger_ttl_s: float = Field(gt=0, le=MAX_TTL.total_seconds())
    credits_before: dict[str, Credit] = {}  # the faulted properties' credits as the run found them
    window_before: SamplerWindow = SamplerWindow()
    max_fault_share: float = Field(0.25, gt=0, le=1)

    def ledger(self) -> Ledger:
        return Ledger(budget=self.ledger_budget, ttl=timedelta(seconds=self.ledger_ttl_s), credits=self.credits_before)


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    status: JobStatus
    exit_code: int
    votes: tuple[Vote, ...]
    ledger: Ledger
    ledger_actions: tuple[LedgerEntry, ...]
    window: SamplerWindow
    reasons: tuple[str, ...]
    inputs: PolicyInputs


def decide(
    verdicts: Sequence[Verdict],
    *,
    frozen: Mapping[str, str],
    ledger: Ledger,
    window: SamplerWindow,
    now: datetime,
    max_fault_share: float = 0.25,
    oracle_edits: Sequence[str] = (),
) -> Decision:
    """Apply the decision table to one run's verdicts; returns the updated ledger and window too."""
    inputs = _inputs(verdicts, ledger, window, max_fault_share)
    votes: list[Vote] = []
    actions: list[LedgerEntry] = []
    reasons: list[str] = []
    blocked = harness_broken = False
    sampled: list[bool] = []
    if oracle_edits:
        # A patch that edits its own oracle is blocked whatever its verdicts say: it graded itself.
        blocked = True
        reasons.append(f"the patch edits oracle files: {', '.join(oracle_edits)}")
    voting_verdicts = [v for v in verdicts if v.property_id not in frozen]
    faulted = sum(1 for v in voting_verdicts if v.kind is Kind.HARNESS_ERROR)
    # One faulted property is a fault in one place, whatever the suite's size.
    broad = faulted > 1 and faulted > max_fault_share * len(voting_verdicts)
    if broad:
        harness_broken = True
        reasons.append(
            f"harness faults on {faulted} of {len(voting_verdicts)} properties (more than {max_fault_share:.0%}):"
            " a broken harness draws no credits"
        )

    for v in verdicts:
        if v.property_id in frozen:
            votes.append(Vote(property_id=v.property_id, kind=v.kind, voting=False, frozen_by=frozen[v.property_id]))
            continue
        action: LedgerAction | None = None
        voting = True
        if v.kind in (Kind.FAIL_SAFETY, Kind.FAIL_CONTRACT):
            blocked = True
            reasons.append(f"{v.property_id}: {v.kind} ({v.detail})")
        elif v.kind is Kind.HARNESS_ERROR and v.band is Band.SAFETY:
            harness_broken = True
            reasons.append(f"{v.property_id}: harness_error on a safety property draws no credit ({v.detail})")
        elif v.kind is Kind.HARNESS_ERROR and not v.creditable:
            harness_broken = True
            reasons.append(f"{v.property_id}: harness_error not proven outside the patch draws no credit ({v.detail})")
        elif v.kind is Kind.HARNESS_ERROR and broad:
            pass  # counted above: no credit for any property of a broken harness
        elif v.kind is Kind.HARNESS_ERROR:
            ledger, entry = ledger.draw(v.property_id, v.detail, now)
            actions.append(entry)
            action = entry.action
            if action is LedgerAction.EXHAUSTED:
                harness_broken = True
                reasons.append(f"{v.property_id}: harness credits exhausted ({v.detail})")
            else:
                voting = False
        if v.band is Band.STATISTICAL and voting:
            sampled.append(v.kind is Kind.INCONCLUSIVE_SAMPLE)
        votes.append(Vote(property_id=v.property_id, kind=v.kind, voting=voting, ledger=action))

    window = window.push(sampled)
    if window.tripped:
        reasons.append(
            f"sampler_budget_exceeded: {window.inconclusive} inconclusive_sample in the last "
            f"{len(window.recent)} (budget {window.max_inconclusive} in {window.size})"
        )

    status, code = _status(votes, blocked=blocked, harness_broken=harness_broken, tripped=window.tripped)
    return Decision(
        status=status,
        exit_code=code,
        votes=tuple(votes),
        ledger=ledger,
        ledger_actions=tuple(actions),
        window=window,
        reasons=tuple(reasons),
        inputs=inputs,
    )


def _inputs(verdicts: Sequence[Verdict], ledger: Ledger, window: SamplerWindow, max_fault_share: float) -> PolicyInputs:
    """What `decide` is given besides the verdicts, as the card records it (the faulted properties' credits only)."""
    faulted_ids = {v.property_id for v in verdicts if v.kind is Kind.HARNESS_ERROR}
    return PolicyInputs(
        ledger_budget=ledger.budget,
        ledger_ttl_s=ledger.ttl.total_seconds(),
        credits_before={pid: c for pid, c in ledger.credits.items() if pid in faulted_ids},
        window_before=window,
        max_fault_share=max_fault_share,
    )


def _status(votes: Sequence[Vote], *, blocked: bool, harness_broken: bool, tripped: bool) -> tuple[JobStatus, int]:
    """The job's status and exit code when several rows fire: 1 over 2 over 3; exit 0 is accepted only when
    every voting row passed."""
    if blocked:
        return JobStatus.BLOCKED, RET_BLOCKED
    if harness_broken:
        return JobStatus.HARNESS_BROKEN, RET_HARNESS
    if tripped:
        return JobStatus.SAMPLER_BUDGET_EXCEEDED, RET_SAMPLER
    if any(vote.voting for vote in votes) and all(vote.kind is Kind.PASS for vote in votes if vote.voting):
        return JobStatus.ACCEPTED, RET_OK
    return JobStatus.INCONCLUSIVE, RET_OK
