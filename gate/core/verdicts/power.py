"""What a band rule means before anyone pays for it: its operating characteristics, computed
exactly by dynamic programming over the trial sequence (no simulation).

For a true hit rate, the state is the distribution of hits after each wave the coordinator would
dispatch (`rule.next_wave`), checked with the very `rule.decide` the fold uses; a fixed rule is
one wave of N (the binomial tail). `window_effect` turns the chance of an inconclusive sample into
the chance that the sampler window (more than `max_inconclusive` in `size`) trips the job.

Pure: values in, values out. The `gate power` command and its plot live in `gate.cli.power`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from gate.core.verdicts.bands import BandRule, SprtRule


class OCPoint(BaseModel):
    """A rule's behaviour at one true hit rate: outcome probabilities and trial counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    rate: float
    p_pass: float
    p_below: float  # decided below the band (for a fixed rule: every non-pass)
    p_undecided: float  # SPRT only: still undecided at max_trials
    expected_trials: float
    p95_trials: int

    @property
    def p_inconclusive(self) -> float:
        """The chance of an inconclusive_sample verdict: below the band or undecided."""
        return self.p_below + self.p_undecided


def binomial_pmf(n: int, p: float) -> list[float]:
    """P(X = k) for k = 0..n with X ~ Bin(n, p), in log space so large n does not overflow."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"rate {p} outside [0, 1]")
    if p in (0.0, 1.0):
        return [1.0 if k == round(p * n) else 0.0 for k in range(n + 1)]
    lp, lq, lgn = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    return [math.exp(lgn - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq) for k in range(n + 1)]


def operating_characteristic(rule: BandRule, rate: float) -> OCPoint:
    """The exact outcome probabilities and trial-count distribution of `rule` at one true rate."""
    frontier: dict[int, list[float]] = {0: [1.0]}
    p_pass = p_below = p_undecided = 0.0
    stopped: dict[int, float] = {}
    wave_pmf: dict[int, list[float]] = {}  # one wave's hit counts, the same at every point of the frontier
    while frontier:
        trials = min(frontier)
        for hits, mass in enumerate(frontier.pop(trials)):
            if mass == 0.0:
                continue
            decision = rule.decide(hits=hits, trials=trials)
            if decision.final:
                stopped[trials] = stopped.get(trials, 0.0) + mass
                if decision.passed:
                    p_pass += mass
                elif isinstance(rule, SprtRule) and rule.state(hits, trials) == "undecided":
                    p_undecided += mass
                else:
                    p_below += mass
                continue
            wave = rule.next_wave(hits, trials)
            if wave <= 0:
                raise ValueError(f"rule is not final at {hits}/{trials} but dispatches no trials")
            target = frontier.setdefault(trials + wave, [0.0] * (trials + wave + 1))
            if wave not in wave_pmf:
                wave_pmf[wave] = binomial_pmf(wave, rate)
            for more, q in enumerate(wave_pmf[wave]):
                target[hits + more] += mass * q
    expected = sum(n * m for n, m in stopped.items())
    cumulative, p95 = 0.0, max(stopped)
    for n in sorted(stopped):
        cumulative += stopped[n]
        if cumulative >= 0.95 - 1e-12:
            p95 = n
            break
    return OCPoint(
        rate=rate, p_pass=p_pass, p_below=p_below, p_undecided=p_undecided, expected_trials=expected, p95_trials=p95
    )


def operating_characteristics(rule: BandRule, rates: Sequence[float]) -> list[OCPoint]:
    """`operating_characteristic` at each of `rates`, in order."""
    return [operating_characteristic(rule, rate) for rate in rates]


def window_effect(p_inconclusive: float, size: int = 20, max_inconclusive: int = 4) -> float:
    """The chance a window of `size` independent verdicts holds more than `max_inconclusive`."""
    if size < 1 or max_inconclusive < 0:
        raise ValueError(f"window size {size} / budget {max_inconclusive} out of range")
    return min(1.0, sum(binomial_pmf(size, p_inconclusive)[max_inconclusive + 1 :]))


def smallest_fixed_n(p0: float, p1: float, alpha: float, beta: float, limit: int = 100_000) -> tuple[int, int]:
    """The smallest (n, min_hits) fixed test with P(fail | p0) <= alpha and P(pass | p1) <= beta."""
    if not 0 < p1 < p0 < 1 or not 0 < alpha < 1 or not 0 < beta < 1:
        raise ValueError(f"need 0 < p1 < p0 < 1 and 0 < alpha, beta < 1 (got {p0}, {p1}, {alpha}, {beta})")
    for n in range(1, limit + 1):
        at_p1, at_p0 = binomial_pmf(n, p1), binomial_pmf(n, p0)
        tail, k = 0.0, n + 1  # smallest k with P(X >= k | p1) <= beta
        while k > 0 and tail + at_p1[k - 1] <= beta:
            k -= 1
            tail += at_p1[k]
        if k <= n and sum(at_p0[:k]) <= alpha:
            return n, k
    raise ValueError(f"no fixed test of at most {limit} trials reaches those error rates")


def power_table(points: Sequence[OCPoint], size: int = 20, max_inconclusive: int = 4) -> str:
    """The `gate power` table: one row per rate, with the chance the sampler window trips."""
    head = f"{'rate':>6} {'P(pass)':>9} {'P(inconc)':>10} {'E[trials]':>10} {'p95':>6} {'P(window trips)':>16}"
    rows = [head]
    for pt in points:
        trips = window_effect(pt.p_inconclusive, size, max_inconclusive)
        rows.append(
            f"{pt.rate:>6.3f} {pt.p_pass:>9.4f} {pt.p_inconclusive:>10.4f} {pt.expected_trials:>10.2f} "
            f"{pt.p95_trials:>6d} {trips:>16.4f}"
        )
    return "\n".join(rows)
