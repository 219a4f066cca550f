"""The paired rule: is the patch worse than the base? Each trial index runs on the base tree and on
the patched tree (same fixture, seed and clock), and the pairs are judged by a sequential test.

A pair scores +1 when only the patch held (patch-only), -1 when only the base held (base-only) and
0 when both or neither held. The trinomial (q+, q0, q-) of the scores has mean d = q+ - q-, the
patch's hit rate minus the base's. The test is a generalized SPRT (the GSPRT Fishtest runs on its
paired games, here on a trinomial because each trial is a hit or a miss) of

    H0: d = 0 (the patch is no worse: pass)  against  H1: d = -margin (worse by the margin),

with the nuisance (how often the two sides disagree) profiled out: the statistic is

    llr = max log L(q | d = -margin) - max log L(q | d = 0),

each maximum over the whole trinomial, so an outcome not yet seen is not given probability zero.
With Wald's bounds A = log((1 - beta) / alpha) and B = log(beta / (1 - alpha)), as `SprtRule`:
llr >= A is worse, llr <= B passes, in between continues; still between at `max_pairs` is
undecided (final, not passed). `alpha` is the chance a patch equal to the base is called worse or
left undecided, `beta` the chance a patch worse by exactly `margin` passes. Pure: counts in,
decisions out.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gate.core.verdicts.bands import FixedRule, Interval, SprtRule, wald_bounds

_Z95 = 1.959963984540054


class PairCounts(BaseModel):
    """How the pairs of one property came out: both held, neither held, only the base, only the patch."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    both_pass: int = Field(0, ge=0)
    both_fail: int = Field(0, ge=0)
    base_only: int = Field(0, ge=0)
    patch_only: int = Field(0, ge=0)

    @classmethod
    def of(cls, pairs: list[tuple[bool, bool]] | tuple[tuple[bool, bool], ...]) -> PairCounts:
        """The counts of (base held, patch held) pairs."""
        return cls(
            both_pass=sum(1 for base, patch in pairs if base and patch),
            both_fail=sum(1 for base, patch in pairs if not base and not patch),
            base_only=sum(1 for base, patch in pairs if base and not patch),
            patch_only=sum(1 for base, patch in pairs if patch and not base),
        )

    @property
    def pairs(self) -> int:
        return self.both_pass + self.both_fail + self.base_only + self.patch_only

    @property
    def discordant(self) -> int:
        return self.base_only + self.patch_only

    @property
    def difference(self) -> float:
        """The patch's observed hit rate minus the base's (0 with no pairs)."""
        return (self.patch_only - self.base_only) / self.pairs if self.pairs else 0.0

    def interval(self, z: float = _Z95) -> Interval:
        """Bonett and Price's adjusted Wald interval for the paired difference (one added to each
        discordant cell, two to the pairs); descriptive: it ignores that the test stopped when it did."""
        n = self.pairs + 2
        up, down = (self.patch_only + 1) / n, (self.base_only + 1) / n
        centre = up - down
        half = z * math.sqrt(max(0.0, up + down - centre * centre) / n)
        return Interval(low=max(-1.0, centre - half), high=min(1.0, centre + half), method="bonett-price")


class PairedState(StrEnum):
    """Where the paired test stands: the only four answers it gives."""

    CONTINUE = "continue"  # between the bounds, below max_pairs: dispatch another wave
    PASS = "pass"  # no worse than the base by the margin
    WORSE = "worse"  # worse than the base by the margin
    UNDECIDED = "undecided"  # between the bounds at max_pairs: final, not passed


class PairedDecision(BaseModel):
    """The paired test's answer for some pair counts, with the estimated difference and its interval."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    state: PairedState
    pairs: int
    llr: float
    difference: float
    interval: Interval
    reason: str

    @property
    def final(self) -> bool:
        return self.state is not PairedState.CONTINUE

    @property
    def passed(self) -> bool:
        return self.state is PairedState.PASS


def _xlogy(count: int, p: float) -> float:
    """count * log(p), with 0 * log(0) = 0 (an outcome never seen costs nothing)."""
    return count * math.log(p) if count else 0.0


def profile_loglik(counts: PairCounts, mean: float) -> float:
    """The largest log-likelihood of `counts` under any trinomial of the scores with mean `mean`.

    With q+ = t, q- = t - mean, q0 = 1 - 2t + mean, the log-likelihood is concave in t and its
    stationary point is the non-negative root of 2n t^2 - ((a + b)(1 + mean) + 2 mean (a + c)) t
    + a mean (1 + mean) = 0 (a patch-only, b base-only, c concordant pairs), cut to t's range."""
    if not -1 < mean < 1:
        raise ValueError(f"mean {mean} outside (-1, 1)")
    a, b, n = counts.patch_only, counts.base_only, counts.pairs
    c = n - a - b
    if n == 0:
        return 0.0
    k = 1 + mean
    linear = (a + b) * k + 2 * mean * (a + c)
    root = (linear + math.sqrt(max(0.0, linear * linear - 8 * n * a * mean * k))) / (4 * n)
    t = min(max(root, max(0.0, mean)), k / 2)
    return _xlogy(a, t) + _xlogy(b, t - mean) + _xlogy(c, k - 2 * t)


class PairedRule(BaseModel):
    """Sequential non-inferiority of the patch against the base on paired trials (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    rule: Literal["paired"] = "paired"
    margin: float = Field(gt=0, le=0.5)
    alpha: float = Field(0.05, gt=0, lt=0.5)
    beta: float = Field(0.05, gt=0, lt=0.5)
    max_pairs: int = Field(ge=1, le=100_000)
    wave: int = Field(10, ge=1, le=100_000)

    @model_validator(mode="after")
    def _reachable(self) -> PairedRule:
        needed = self.pairs_to_pass()
        if needed > self.max_pairs:
            raise ValueError(f"max_pairs {self.max_pairs} is below the {needed} agreeing pairs the test needs to pass")
        return self

    @property
    def upper(self) -> float:
        """A: at or above it the patch is worse."""
        return wald_bounds(self.alpha, self.beta)[0]

    @property
    def lower(self) -> float:
        """B: at or below it the patch is no worse."""
        return wald_bounds(self.alpha, self.beta)[1]

    def llr(self, counts: PairCounts) -> float:
        """The profile log-likelihood ratio of "worse by the margin" against "no worse"."""
        return profile_loglik(counts, -self.margin) - profile_loglik(counts, 0.0)

    def pairs_to_pass(self) -> int:
        """The fewest pairs, all agreeing, after which the test can pass (ignoring waves).

        With no disagreement the llr is n * log(1 - margin)."""
        n = max(1, math.ceil(self.lower / math.log1p(-self.margin)))
        while self.llr(PairCounts(both_pass=n)) > self.lower:
            n += 1
        while n > 1 and self.llr(PairCounts(both_pass=n - 1)) <= self.lower:
            n -= 1
        return n

    def state(self, counts: PairCounts) -> PairedState:
        """Where the counts stand: pass, worse, undecided at the cap, or continue."""
        llr = self.llr(counts)
        upper, lower = wald_bounds(self.alpha, self.beta)
        if llr <= lower:
            return PairedState.PASS
        if llr >= upper:
            return PairedState.WORSE
        return PairedState.UNDECIDED if counts.pairs >= self.max_pairs else PairedState.CONTINUE

    def decide(self, counts: PairCounts) -> PairedDecision:
        """The state with the estimate, its interval and a one-line reason naming the outcome."""
        state, llr = self.state(counts), self.llr(counts)
        estimate = counts.interval()
        seen = (
            f"{counts.pairs} pairs ({counts.both_pass} both held, {counts.both_fail} neither, "
            f"{counts.base_only} base only, {counts.patch_only} patch only), "
            f"difference {counts.difference:+.3f} [{estimate.low:+.3f}, {estimate.high:+.3f}]"
        )
        bounds = f"llr {llr:.3f} in ({self.lower:.3f}, {self.upper:.3f})"
        reason = {
            PairedState.PASS: f"{seen}: no worse than the base by {self.margin}",
            PairedState.WORSE: f"{seen}: worse than the base by {self.margin}",
            PairedState.UNDECIDED: f"{seen}: undecided at max_pairs {self.max_pairs} ({bounds})",
            PairedState.CONTINUE: f"{seen}: undecided before max_pairs {self.max_pairs}",
        }[state]
        return PairedDecision(
            state=state, pairs=counts.pairs, llr=llr, difference=counts.difference, interval=estimate, reason=reason
        )

    def next_wave(self, counts: PairCounts) -> int:
        """How many more pairs to dispatch now: one wave (cut to the cap), or 0 once decided."""
        if self.state(counts) is not PairedState.CONTINUE:
            return 0
        return min(self.wave, self.max_pairs - counts.pairs)

    def planned_trials(self) -> int:
        """Trial indices on each side at most (the base runs the same indices again)."""
        return self.max_pairs


# Any statistical row's rule as a card records it: a band rule on one sample, or the paired rule.
AnyRule = Annotated[FixedRule | SprtRule | PairedRule, Field(discriminator="rule")]
