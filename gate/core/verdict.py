"""Typed verdicts, and the fold from one property's trial outcomes to exactly one of them.

The constructors are closed: every path through `fold` ends in one of the six `Kind`s, never in
`None` or "unknown". A property's trials are first judged one by one (`Outcome`), then folded by
band. Precedence across trials: definite evidence against the patch (a safety or contract miss on
a trial that was observed) outranks a gap in the evidence (harness fault, timeout), which outranks
sampler noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from gate.core.bands import BandRule, Interval, wilson


class Kind(StrEnum):
    PASS = "pass"
    FAIL_SAFETY = "fail_safety"
    FAIL_CONTRACT = "fail_contract"
    INCONCLUSIVE_TIMEOUT = "inconclusive_timeout"
    INCONCLUSIVE_SAMPLE = "inconclusive_sample"
    HARNESS_ERROR = "harness_error"


class Band(StrEnum):
    SAFETY = "safety"
    CONTRACT = "contract"
    STATISTICAL = "statistical"


class OutcomeKind(StrEnum):
    HIT = "hit"  # the check held on this trial
    MISS = "miss"  # the check did not hold on this trial
    TIMEOUT = "timeout"  # the deadline fired before the trial finished
    FAULT = "fault"  # the gate could not observe this trial


class Outcome(BaseModel):
    """One trial, judged: did the check hold, and if not, why not. A fault says whether it was
    proven to come from outside the patch (`creditable`): only such a fault may draw a credit."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    trial_index: int
    kind: OutcomeKind
    detail: str = ""
    creditable: bool = False
    check_raised: bool = False  # the check raised on this trial's output (a miss, and a suite bug on the base)


class Verdict(BaseModel):
    """The one verdict a property earns in a run."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Kind
    property_id: str
    band: Band
    fixture_digest: str
    trials: int
    hits: int
    detail: str = ""
    interval: Interval | None = None
    # A harness_error may draw a credit only when every fault behind it came from outside the patch.
    creditable: bool = False
    check_raised: bool = False  # on some trial the check raised rather than judged


def harness_verdict(
    property_id: str, band: Band, fixture_digest: str, detail: str, *, creditable: bool
) -> Verdict:
    """A harness_error for a property none of whose trials ran (drift, no sandbox, trials lost)."""
    return Verdict(
        kind=Kind.HARNESS_ERROR,
        property_id=property_id,
        band=band,
        fixture_digest=fixture_digest,
        trials=0,
        hits=0,
        detail=detail,
        creditable=creditable,
    )


def fold(
    *,
    property_id: str,
    band: Band,
    fixture_digest: str,
    outcomes: Sequence[Outcome],
    rule: BandRule | None = None,
    timeout_is_safety: bool = False,
) -> Verdict:
    """Fold a property's judged trials into its verdict, following the band's rule."""
    hits = sum(1 for o in outcomes if o.kind is OutcomeKind.HIT)
    interval = wilson(hits, len(outcomes)) if band is Band.STATISTICAL and outcomes else None

    def make(kind: Kind, detail: str = "", creditable: bool = False) -> Verdict:
        return Verdict(
            kind=kind,
            property_id=property_id,
            band=band,
            fixture_digest=fixture_digest,
            trials=len(outcomes),
            hits=hits,
            detail=detail,
            interval=interval,
            creditable=creditable,
            check_raised=any(o.check_raised for o in outcomes),
        )

    if not outcomes:
        return make(Kind.HARNESS_ERROR, "no trial was observed")

    misses = [o for o in outcomes if o.kind is OutcomeKind.MISS]
    faults = [o for o in outcomes if o.kind is OutcomeKind.FAULT]
    timeouts = [o for o in outcomes if o.kind is OutcomeKind.TIMEOUT]

    if band is Band.SAFETY and misses:
        return make(Kind.FAIL_SAFETY, _first(misses))
    if timeouts and timeout_is_safety:
        return make(Kind.FAIL_SAFETY, f"deadline fired (timeout_is_safety): {_first(timeouts)}")
    if band is Band.CONTRACT and misses:
        return make(Kind.FAIL_CONTRACT, _first(misses))
    if faults:
        return make(Kind.HARNESS_ERROR, _first(faults), creditable=all(o.creditable for o in faults))
    if timeouts:
        return make(Kind.INCONCLUSIVE_TIMEOUT, _first(timeouts))
    if band is Band.STATISTICAL:
        if rule is None:
            raise ValueError(f"statistical property {property_id} needs a band rule")
        decision = rule.decide(hits=hits, trials=len(outcomes))
        if decision.passed:
            return make(Kind.PASS, decision.reason)
        return make(Kind.INCONCLUSIVE_SAMPLE, decision.reason)
    return make(Kind.PASS)


def _first(outcomes: Sequence[Outcome]) -> str:
    head = outcomes[0]
    more = f" (+{len(outcomes) - 1} more)" if len(outcomes) > 1 else ""
    return f"trial {head.trial_index}: {head.detail}{more}"
