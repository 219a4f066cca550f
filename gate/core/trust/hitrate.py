"""Statistical properties vary by design, so besides replaying a share of their trials with the same
seed (`gate.core.trust.replay`) each worker's hit rate on a property is compared with the rest of the
fleet's by Fisher's exact test on the 2x2 table (this worker vs the others, hits vs misses), two-sided,
at `ALPHA` with a Bonferroni correction over every test of the run. An outlier is flagged on the card,
never quarantined: a patch can tell machines apart (CPU count, kernel) and behave differently on one. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import comb

from pydantic import BaseModel, ConfigDict, Field

ALPHA = 0.01  # family-wise: each of the m tests runs at ALPHA / m
_RELATIVE = 1 + 1e-7  # tables as likely as the observed one, up to float rounding, count as extreme


def fisher_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Fisher's exact two-sided p-value of the table [[a, b], [c, d]]: the probability, with the margins
    fixed, of a table no more likely than this one."""
    row, col, n = a + b, a + c, a + b + c + d
    if n == 0:
        return 1.0
    total = comb(n, col)

    def prob(x: int) -> float:
        return comb(row, x) * comb(n - row, col - x) / total

    observed = prob(a)
    low, high = max(0, col - (n - row)), min(row, col)
    return min(1.0, sum(p for x in range(low, high + 1) if (p := prob(x)) <= observed * _RELATIVE))


class HitRateOutlier(BaseModel):
    """A worker whose hit rate on a statistical property differs from the other workers' beyond chance."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    property_id: str
    worker: str
    hits: int = Field(ge=0)
    trials: int = Field(ge=0)
    rest_hits: int = Field(ge=0)
    rest_trials: int = Field(ge=0)
    p_value: float
    alpha: float  # the per-test level after the correction

    def line(self) -> str:
        """`rate: w2 10/10 hits vs the rest 3/20 (p=1.2e-05 < 1.0e-03)`."""
        return (
            f"{self.property_id}: {self.worker} {self.hits}/{self.trials} hits vs the rest "
            f"{self.rest_hits}/{self.rest_trials} (p={self.p_value:.1e} < {self.alpha:.1e})"
        )


Rates = Mapping[str, Mapping[str, tuple[int, int]]]  # property -> worker -> (hits, judged trials)


def outliers(rates: Rates, alpha: float = ALPHA) -> tuple[HitRateOutlier, ...]:
    """Each worker vs the rest on each property where both sides judged trials; Bonferroni over all."""
    tests: list[tuple[str, str, int, int, int, int]] = []
    for property_id, by_worker in sorted(rates.items()):
        total_hits = sum(h for h, _ in by_worker.values())
        total = sum(n for _, n in by_worker.values())
        for worker, (hits, trials) in sorted(by_worker.items()):
            if trials and total - trials:
                tests.append((property_id, worker, hits, trials, total_hits - hits, total - trials))
    if not tests:
        return ()
    level = alpha / len(tests)
    flagged = []
    for property_id, worker, hits, trials, rest_hits, rest in tests:
        p = fisher_two_sided(hits, trials - hits, rest_hits, rest - rest_hits)
        if p < level:
            flagged.append(
                HitRateOutlier(
                    property_id=property_id,
                    worker=worker,
                    hits=hits,
                    trials=trials,
                    rest_hits=rest_hits,
                    rest_trials=rest,
                    p_value=p,
                    alpha=level,
                )
            )
    return tuple(flagged)
