"""Statistical-band rules: how many hits in how many trials count as a pass, and the budget
that turns too many inconclusive samples into a failed job.

Two rules share one interface (`decide`, `planned_trials`, `next_wave`): `FixedRule` (N trials,
pass at `min_hits`) and `SprtRule` (Wald's sequential test, dispatched in waves, stopping early).

Every statistical row also carries a Wilson score interval, because 8 of 10 says far less than
it seems to (95% interval about [0.49, 0.94]).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_Z95 = 1.959963984540054


class Interval(BaseModel):
    """A two-sided confidence interval for a rate, with the method that produced it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    low: float
    high: float
    level: float = 0.95
    method: str = "wilson"


def wald_bounds(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's stopping bounds on a log-likelihood ratio: (A, B), at or above A the alternative, at or below B
    the null (Wald 1945; the SPRT band and the paired rule both stop on them)."""
    return math.log((1 - beta) / alpha), math.log(beta / (1 - alpha))


def wilson(hits: int, trials: int, z: float = _Z95) -> Interval:
    """Wilson score interval for `hits` successes in `trials` Bernoulli trials."""
    if trials <= 0:
        return Interval(low=0.0, high=1.0)
    if not 0 <= hits <= trials:
        raise ValueError(f"hits {hits} outside 0..{trials}")
    p = hits / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    # At 0 or n hits the bound is exactly the observed rate; float rounding must not move it.
    low = 0.0 if hits == 0 else max(0.0, centre - half)
    high = 1.0 if hits == trials else min(1.0, centre + half)
    return Interval(low=low, high=high)


class BandDecision(BaseModel):
    """A band rule's answer for some hits in some trials; `final` False means dispatch more trials."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    passed: bool
    reason: str
    final: bool = True


class FixedRule(BaseModel):
    """The notes' default: run `trials` trials, pass when at least `min_hits` held."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    rule: Literal["fixed"] = "fixed"
    trials: int = Field(10, ge=1, le=100_000)
    min_hits: int = Field(8, ge=0)

    @model_validator(mode="after")
    def _hits_fit(self) -> FixedRule:
        if self.min_hits > self.trials:
            raise ValueError(f"min_hits {self.min_hits} exceeds trials {self.trials}")
        return self

    def planned_trials(self) -> int:
        return self.trials

    def decide(self, *, hits: int, trials: int) -> BandDecision:
        """Pass when the hits reach the band; below it is sampler noise, not a failure.

        The decision is final once the planned trials have all been observed.
        """
        final = trials >= self.trials
        if hits >= self.min_hits:
            return BandDecision(passed=True, reason=f"{hits}/{trials} hits, band needs {self.min_hits}", final=final)
        return BandDecision(passed=False, reason=f"{hits}/{trials} hits below band of {self.min_hits}", final=final)

    def next_wave(self, hits: int, trials: int) -> int:
        """How many more trials to dispatch now: all that remain of the plan."""
        return max(0, self.trials - trials)


SprtState = Literal["pass", "below", "undecided", "open"]


class SprtRule(BaseModel):
    """Wald's sequential probability ratio test for a Bernoulli hit rate, checked at wave ends.

    H0: rate >= p0 (the band holds: pass) against H1: rate <= p1 (below the band), p1 < p0.
    The statistic is the log-likelihood ratio of H1 against H0 after `hits` in `trials`,

        llr = hits * log(p1 / p0) + (trials - hits) * log((1 - p1) / (1 - p0)),

    which falls with every hit and rises with every miss. With A = log((1 - beta) / alpha) and
    B = log(beta / (1 - alpha)): llr <= B passes, llr >= A is below the band, anything between is
    undecided; undecided at `max_trials` is final and does not pass. `alpha` is the chance that a
    rate of exactly p0 is called below the band (or left undecided by the cap), `beta` the chance
    that a rate of exactly p1 passes. Trials go out in waves of `wave`; the coordinator asks again
    after each wave, so the test is checked at trials = wave, 2 * wave, ... and max_trials.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    rule: Literal["sprt"] = "sprt"
    p0: float = Field(gt=0, lt=1)
    p1: float = Field(gt=0, lt=1)
    alpha: float = Field(0.05, gt=0, lt=0.5)
    beta: float = Field(0.05, gt=0, lt=0.5)
    max_trials: int = Field(ge=1, le=100_000)
    wave: int = Field(5, ge=1, le=100_000)

    @model_validator(mode="after")
    def _sane(self) -> SprtRule:
        if not self.p1 < self.p0:
            raise ValueError(f"p1 {self.p1} must be below p0 {self.p0} (H0: rate >= p0 passes, H1: rate <= p1)")
        needed = self.trials_to_pass()
        if needed > self.max_trials:
            raise ValueError(f"max_trials {self.max_trials} is below the {needed} straight hits the test needs to pass")
        return self

    @property
    def upper(self) -> float:
        """A: at or above it the rate is below the band."""
        return wald_bounds(self.alpha, self.beta)[0]

    @property
    def lower(self) -> float:
        """B: at or below it the band holds."""
        return wald_bounds(self.alpha, self.beta)[1]

    @property
    def hit_step(self) -> float:
        """What one hit adds to the llr: log(p1 / p0), below 0."""
        return math.log(self.p1 / self.p0)

    @property
    def miss_step(self) -> float:
        """What one trial that is not a hit adds to the llr: log((1 - p1) / (1 - p0)), above 0."""
        return math.log((1 - self.p1) / (1 - self.p0))

    def llr(self, hits: int, trials: int) -> float:
        """The log-likelihood ratio of H1 (rate <= p1) against H0 (rate >= p0)."""
        return hits * self.hit_step + (trials - hits) * self.miss_step

    def llr_path(self, hits: Iterable[bool]) -> tuple[float, ...]:
        """The llr after each trial of `hits` (True: a hit), in order; the last is `llr` of them all."""
        # Each point is `llr` of the counts so far, not a running sum of steps: no rounding drift, so
        # the last point is exactly the value `state` judges.
        path: list[float] = []
        hit_count = 0
        for trials, hit in enumerate(hits, start=1):
            hit_count += bool(hit)
            path.append(self.llr(hit_count, trials))
        return tuple(path)

    def trials_to_pass(self) -> int:
        """The fewest trials, all hits, after which the test can pass (ignoring waves)."""
        n = max(1, math.ceil(self.lower / self.hit_step))
        while self.llr(n, n) > self.lower:
            n += 1
        while n > 1 and self.llr(n - 1, n - 1) <= self.lower:
            n -= 1
        return n

    def state(self, hits: int, trials: int) -> SprtState:
        """Where (hits, trials) stands: pass, below, undecided at the cap, or still open."""
        if not 0 <= hits <= trials:
            raise ValueError(f"hits {hits} outside 0..{trials}")
        llr = self.llr(hits, trials)
        if llr <= self.lower:
            return "pass"
        if llr >= self.upper:
            return "below"
        return "undecided" if trials >= self.max_trials else "open"

    def planned_trials(self) -> int:
        return self.max_trials

    def decide(self, *, hits: int, trials: int) -> BandDecision:
        """Pass, below the band, undecided at max_trials (final, not passed), or not yet final."""
        state = self.state(hits, trials)
        if state == "pass":
            return BandDecision(passed=True, reason=f"{hits}/{trials} hits, sprt accepts rate >= {self.p0}")
        if state == "below":
            return BandDecision(passed=False, reason=f"{hits}/{trials} hits, sprt finds rate <= {self.p1}")
        if state == "undecided":
            llr = f"llr {self.llr(hits, trials):.3f} in ({self.lower:.3f}, {self.upper:.3f})"
            return BandDecision(passed=False, reason=f"{hits}/{trials} hits, undecided at max_trials ({llr})")
        return BandDecision(
            passed=False, reason=f"{hits}/{trials} hits, undecided before max_trials {self.max_trials}", final=False
        )

    def next_wave(self, hits: int, trials: int) -> int:
        """How many more trials to dispatch now: one wave (cut to the cap), or 0 once decided."""
        if self.state(hits, trials) != "open":
            return 0
        return min(self.wave, self.max_trials - trials)


BandRule = Annotated[FixedRule | SprtRule, Field(discriminator="rule")]


class SamplerWindow(BaseModel):
    """The last `size` statistical verdicts (True = inconclusive_sample), oldest first.

    More than `max_inconclusive` inconclusive samples inside the window trips the budget: the
    sampler is too noisy to measure the patch, and the job fails with exit 3.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    size: int = Field(20, ge=1)
    max_inconclusive: int = Field(4, ge=0)
    recent: tuple[bool, ...] = ()

    def push(self, inconclusive: Iterable[bool]) -> SamplerWindow:
        """The window after appending these verdicts, keeping only the newest `size`."""
        merged = (*self.recent, *inconclusive)
        return self.model_copy(update={"recent": merged[-self.size :]})

    @property
    def inconclusive(self) -> int:
        return sum(self.recent)

    @property
    def tripped(self) -> bool:
        return self.inconclusive > self.max_inconclusive
