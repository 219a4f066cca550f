"""Statistical-band rules: how many hits in how many trials count as a pass, and the budget
that turns too many inconclusive samples into a failed job.

Every statistical row also carries a Wilson score interval, because 8 of 10 says far less than
it seems to (95% interval about [0.49, 0.94]).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_Z95 = 1.959963984540054


class Interval(BaseModel):
    """A two-sided confidence interval for a rate, with the method that produced it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    low: float
    high: float
    level: float = 0.95
    method: str = "wilson"


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
    model_config = ConfigDict(frozen=True, extra="forbid")
    passed: bool
    reason: str


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
        """Pass when the hits reach the band; below it is sampler noise, not a failure."""
        if hits >= self.min_hits:
            return BandDecision(passed=True, reason=f"{hits}/{trials} hits, band needs {self.min_hits}")
        return BandDecision(passed=False, reason=f"{hits}/{trials} hits below band of {self.min_hits}")


BandRule = FixedRule


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
