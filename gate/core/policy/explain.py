"""Which source of nondeterminism moves a flaky property: the sequential plan of `gate flakes explain`.

A source explains a flake when the property is steady with that source fixed (every observed trial
the same colour, `steady_n` of them: with n steady trials the flicker rate is at most about 3/n at
95%) and flickers when only that source varies. The plan measures that, never guesses it:

1. every source varies: steady → nothing to explain (`steady`);
2. every source fixed: flickers → the residual, entropy the sandbox does not control (`residual`);
3. halving the fixed set while it stays steady finds the smallest set of sources that holds the
   property (one source, or two when it takes both);
4. each source of that set varied alone must make it flicker (`explained`), else `unexplained`.

A variant stops as soon as it shows two colours, so a cause costs a few trials and only the steady
claims cost `steady_n`. The plan is a generator: it yields the next `Variant` and is sent whether it
held steady; `gate.run.explain` runs the trials and keeps the budget. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from gate.core.policy.sources import ALL_FIXED, ALL_VARY, SOURCES, Source, Variant
from gate.core.verdicts.verdict import Outcome, OutcomeKind

STEADY_N = 30  # steady trials per claim: a flicker rate above 3/30 = 10% would have shown (95%)
BUDGET = 200  # trials one explanation may spend
COLOURS = (OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.TIMEOUT)  # a fault shows no colour


class Showed(StrEnum):
    STEADY = "steady"
    FLICKERS = "flickers"
    UNFINISHED = "unfinished"  # the budget ran out, or faults left too few observed trials


class Tried(BaseModel):
    """One variant as it ran: which sources were fixed and varied, and how its trials came out."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    fixed: tuple[Source, ...]
    varied: tuple[Source, ...]
    trials: int = Field(ge=0)
    hits: int = Field(ge=0)
    misses: int = Field(ge=0)
    timeouts: int = Field(ge=0)
    faults: int = Field(ge=0)
    showed: Showed

    @classmethod
    def of(cls, variant: Variant, outcomes: Sequence[Outcome], showed: Showed) -> Tried:
        def count(kind: OutcomeKind) -> int:
            return sum(1 for o in outcomes if o.kind is kind)

        return cls(
            fixed=tuple(s for s in SOURCES if s in variant.fixed),
            varied=tuple(s for s in SOURCES if s not in variant.fixed),
            trials=len(outcomes),
            hits=count(OutcomeKind.HIT),
            misses=count(OutcomeKind.MISS),
            timeouts=count(OutcomeKind.TIMEOUT),
            faults=count(OutcomeKind.FAULT),
            showed=showed,
        )

    def counts(self) -> str:
        """`31/40 hits`, or `30/30 misses` when all were one colour (and the faults, if any)."""
        observed = self.hits + self.misses + self.timeouts
        if observed and self.faults == 0 and observed in (self.misses, self.timeouts):
            return f"{observed}/{observed} {'misses' if self.misses else 'timed out'}"
        extra = (f", {self.timeouts} timed out" if self.timeouts else "") + (
            f", {self.faults} faulted" if self.faults else ""
        )
        return f"{self.hits}/{observed} hits{extra}"


class Finding(StrEnum):
    EXPLAINED = "explained"  # steady with `source` fixed, flickers when only it varies
    RESIDUAL = "residual"  # flickers with every source the sandbox controls held fixed
    STEADY = "steady"  # steady with every source varying: not a flake here, nothing to explain
    UNEXPLAINED = "unexplained"  # the budget ran out, or the measurements named no source


class Explanation(BaseModel):
    """What explain measured for one property: the source and the two variants that show it, or why not."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    property_id: str
    finding: Finding
    source: str = ""  # "hash_seed", "trial_seed+hash_seed", "residual"; "" unless explained or residual
    steady_with: Tried | None = None
    flickers_with: tuple[Tried, ...] = ()  # one per source named
    trials: int = Field(0, ge=0)
    bound: float | None = None  # the flicker rate steady_with bounds (95%): about 3/n
    tried: tuple[Tried, ...] = ()
    words: str = ""  # the sentence a repair task and a freeze reason carry


def stop_rule(outcomes: Sequence[Outcome], steady_n: int) -> Showed | None:
    """What a variant's trials so far show: flickers at the second colour, steady at `steady_n` observed
    trials of one colour, None while undecided (faults are not observations)."""
    colours = {o.kind for o in outcomes if o.kind in COLOURS}
    if len(colours) > 1:
        return Showed.FLICKERS
    observed = sum(1 for o in outcomes if o.kind in COLOURS)
    return Showed.STEADY if observed >= steady_n else None


Plan = Generator[Variant, bool, tuple[Finding, frozenset[Source]]]


def plan() -> Plan:
    """The search: yields variants, is sent True when one held steady; returns what it found and the
    sources it names. A variant asked for again is answered from what it showed before."""
    if (yield ALL_VARY):
        return Finding.STEADY, frozenset()
    if not (yield ALL_FIXED):
        return Finding.RESIDUAL, frozenset()
    found = yield from _narrow(SOURCES, frozenset())
    if not (yield Variant(found)):
        return Finding.UNEXPLAINED, found
    for source in _ordered(found):
        if (yield alone(source)):
            return Finding.UNEXPLAINED, found  # it does not flicker when only this source varies
    return Finding.EXPLAINED, found


def _narrow(candidates: Sequence[Source], kept: frozenset[Source]) -> Generator[Variant, bool, frozenset[Source]]:
    """The smallest part of `candidates` that, fixed with `kept`, holds the property steady, given
    that all of `candidates` with `kept` does."""
    if len(candidates) == 1:
        return frozenset(candidates)
    middle = (len(candidates) + 1) // 2
    left, right = candidates[:middle], candidates[middle:]
    if (yield Variant(kept | frozenset(left))):
        return (yield from _narrow(left, kept))
    if (yield Variant(kept | frozenset(right))):
        return (yield from _narrow(right, kept))
    # Each half alone lets it flicker: it takes sources from both.
    found = yield from _narrow(left, kept | frozenset(right))
    return found | (yield from _narrow(right, kept | found))


def alone(source: Source) -> Variant:
    """Every source fixed but `source`."""
    return Variant(ALL_FIXED.fixed - {source})


def _ordered(sources: frozenset[Source]) -> list[Source]:
    return [s for s in SOURCES if s in sources]


def bound(steady: int) -> float:
    """The flicker rate `steady` trials of one colour bound at 95%: 1 - 0.05**(1/n), about 3/n."""
    return round(1 - 0.05 ** (1 / steady), 4)
