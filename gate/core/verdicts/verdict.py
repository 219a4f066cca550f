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
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gate.core.escaping import one_line
from gate.core.verdicts.bands import BandRule, Interval, wilson
from gate.core.verdicts.paired import PairCounts, PairedState


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


def _utf8(text: str) -> str:
    # A check may quote the patch's output, and JSON lets a probe print a lone surrogate ("\ud800"),
    # which no UTF-8 card can hold: escape it, so the patch cannot stop the card being written.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# A detail: free text, often quoting the patch's output; always encodable.
Detail = Annotated[str, AfterValidator(_utf8)]


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
    detail: Detail = ""
    creditable: bool = False
    check_raised: bool = False  # the check raised on this trial's output (a miss, and a suite bug on the base)


class OutcomeCounts(BaseModel):
    """How a property's judged trials came out, counted: what `kind_of` needs to re-derive the kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    hit: int = Field(0, ge=0)
    miss: int = Field(0, ge=0)
    timeout: int = Field(0, ge=0)
    fault: int = Field(0, ge=0)
    # Of `fault`, how many were proven to come from outside the patch.
    fault_creditable: int = Field(0, ge=0)

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> OutcomeCounts:
        faults = [o for o in outcomes if o.kind is OutcomeKind.FAULT]
        return cls(
            hit=sum(1 for o in outcomes if o.kind is OutcomeKind.HIT),
            miss=sum(1 for o in outcomes if o.kind is OutcomeKind.MISS),
            timeout=sum(1 for o in outcomes if o.kind is OutcomeKind.TIMEOUT),
            fault=len(faults),
            fault_creditable=sum(1 for o in faults if o.creditable),
        )

    @property
    def trials(self) -> int:
        return self.hit + self.miss + self.timeout + self.fault

    @property
    def creditable(self) -> bool:
        """A harness_error from these trials may draw a credit: every fault was proven outside the patch."""
        return self.fault > 0 and self.fault_creditable == self.fault


class ColourChange(BaseModel):
    """A safety or contract property whose trials on identical sealed bytes disagreed: the indices of
    the trials on each side. Reported, never excused: the row keeps the kind its misses earn."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    hits: tuple[int, ...]
    misses: tuple[int, ...]

    @classmethod
    def of(cls, band: Band, outcomes: Sequence[Outcome]) -> ColourChange | None:
        """The disagreement among `outcomes`, or None: a statistical property's trials may differ by design."""
        if band is Band.STATISTICAL:
            return None
        hits = tuple(sorted(o.trial_index for o in outcomes if o.kind is OutcomeKind.HIT))
        misses = tuple(sorted(o.trial_index for o in outcomes if o.kind is OutcomeKind.MISS))
        return cls(hits=hits, misses=misses) if hits and misses else None

    def line(self) -> str:
        """`changed colour on identical bytes: hits at trials 0, 2; misses at trials 1` (at most 10 each)."""

        def shown(indices: tuple[int, ...]) -> str:
            listed = ", ".join(str(i) for i in indices[:10])
            return listed + (f" and {len(indices) - 10} more" if len(indices) > 10 else "")

        hits, misses = shown(self.hits), shown(self.misses)
        return f"changed colour on identical bytes: hits at trials {hits}; misses at trials {misses}"


class PairedEvidence(BaseModel):
    """A paired row's other half: the base tree's trials of the same indices, the pairs they make with
    the patch's, and the paired test's state on those pairs (`gate.core.verdicts.pairfold`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    base: OutcomeCounts = OutcomeCounts()
    pairs: PairCounts = PairCounts()
    state: PairedState = PairedState.CONTINUE


class Verdict(BaseModel):
    """The one verdict a property earns in a run."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Kind
    property_id: str
    band: Band
    fixture_digest: str
    trials: int
    hits: int
    detail: Detail = ""
    interval: Interval | None = None
    # A harness_error may draw a credit only when every fault behind it came from outside the patch.
    creditable: bool = False
    check_raised: bool = False  # on some trial the check raised rather than judged
    counts: OutcomeCounts = OutcomeCounts()
    colour_change: ColourChange | None = None
    paired: PairedEvidence | None = None  # the paired rule's base side and pairs (None: any other rule)


def harness_verdict(property_id: str, band: Band, fixture_digest: str, detail: str, *, creditable: bool) -> Verdict:
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


def kind_of(counts: OutcomeCounts, band: Band, rule: BandRule | None = None, *, promoted: bool = False) -> Kind:
    """The kind these counts earn: the whole fold, on counts alone, so `accept` re-derives the same.

    Precedence: definite evidence against the patch (a safety miss, a promoted timeout, a contract
    miss) outranks a gap in the evidence (fault, timeout), which outranks sampler noise."""
    if counts.trials == 0:
        return Kind.HARNESS_ERROR
    if band is Band.SAFETY and counts.miss:
        return Kind.FAIL_SAFETY
    if counts.timeout and promoted:
        return Kind.FAIL_SAFETY
    if band is Band.CONTRACT and counts.miss:
        return Kind.FAIL_CONTRACT
    if counts.fault:
        return Kind.HARNESS_ERROR
    if counts.timeout:
        return Kind.INCONCLUSIVE_TIMEOUT
    if band is Band.STATISTICAL:
        if rule is None:
            raise ValueError("a statistical property needs a band rule to decide")
        return Kind.PASS if rule.decide(hits=counts.hit, trials=counts.trials).passed else Kind.INCONCLUSIVE_SAMPLE
    return Kind.PASS


def fold(
    *,
    property_id: str,
    band: Band,
    fixture_digest: str,
    outcomes: Sequence[Outcome],
    rule: BandRule | None = None,
    timeout_is_safety: bool = False,
) -> Verdict:
    """Fold a property's judged trials into its verdict (`kind_of`), with the detail that explains it."""
    counts = OutcomeCounts.of(outcomes)
    kind = kind_of(counts, band, rule, promoted=timeout_is_safety)
    by_kind = {k: [o for o in outcomes if o.kind is k] for k in OutcomeKind}
    if not outcomes:
        detail = "no trial was observed"
    elif kind in (Kind.FAIL_SAFETY, Kind.FAIL_CONTRACT) and by_kind[OutcomeKind.MISS] and band is not Band.STATISTICAL:
        detail = first_outcome(by_kind[OutcomeKind.MISS])
    elif kind is Kind.FAIL_SAFETY:
        detail = f"deadline fired (timeout_is_safety): {first_outcome(by_kind[OutcomeKind.TIMEOUT])}"
    elif kind is Kind.HARNESS_ERROR:
        detail = first_outcome(by_kind[OutcomeKind.FAULT])
    elif kind is Kind.INCONCLUSIVE_TIMEOUT:
        detail = first_outcome(by_kind[OutcomeKind.TIMEOUT])
    elif band is Band.STATISTICAL and rule is not None:
        detail = rule.decide(hits=counts.hit, trials=counts.trials).reason + first_misses(outcomes)
    else:
        detail = ""
    change = ColourChange.of(band, outcomes)
    if change is not None:
        detail = f"{detail}; {change.line()}" if detail else change.line()
    return Verdict(
        kind=kind,
        property_id=property_id,
        band=band,
        fixture_digest=fixture_digest,
        trials=counts.trials,
        hits=counts.hit,
        detail=detail,
        interval=wilson(counts.hit, counts.trials) if band is Band.STATISTICAL and outcomes else None,
        creditable=kind is Kind.HARNESS_ERROR and counts.creditable,
        check_raised=any(o.check_raised for o in outcomes),
        counts=counts,
        colour_change=change,
    )


FIRST_MISSES = 3  # distinct messages a statistical row keeps
MISS_CHARS = 200  # each cut to this many characters


def first_misses(outcomes: Sequence[Outcome]) -> str:
    """The first few distinct miss/fault messages, in trial order, escaped onto one line: a count
    alone ("0/200 hits below band of 190") would lose what the check said."""
    seen: dict[str, int] = {}
    for o in sorted(outcomes, key=lambda o: o.trial_index):
        if o.kind in (OutcomeKind.MISS, OutcomeKind.FAULT) and o.detail and o.detail not in seen:
            seen[o.detail] = o.trial_index
            if len(seen) == FIRST_MISSES:
                break
    if not seen:
        return ""
    shown = [f"trial {index}: {one_line(_cut(text))}" for text, index in seen.items()]
    return "; first misses: " + "; ".join(shown)


def _cut(text: str) -> str:
    return text if len(text) <= MISS_CHARS else text[: MISS_CHARS - 1] + "…"


def first_outcome(outcomes: Sequence[Outcome]) -> str:
    """`trial N: detail` of the first outcome, with how many more there are."""
    head = outcomes[0]
    more = f" (+{len(outcomes) - 1} more)" if len(outcomes) > 1 else ""
    return f"trial {head.trial_index}: {head.detail}{more}"
