"""What the paired rule costs before anyone runs it: its operating characteristic at a true base and
patch rate, computed by dynamic programming over the pair counts, checked with the very
`PairedRule.state` the fold uses at the pair counts the coordinator would check (each wave's end).

A pair's outcome depends on how the two sides' hits go together, not only on their rates: `PairLaw`
says how often a pair is patch-only and base-only. `independent` assumes the seed tells nothing
(the most disagreement for two rates short of anti-correlation, so the most pairs); `shared` assumes
the same seed makes both sides hit together whenever they can (the fewest disagreements). A real
seeded probe lies between. Pure: values in, values out; `gate power --rule paired` prints it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gate.core.verdicts.paired import PairCounts, PairedRule, PairedState

# Paths whose probability falls below this are dropped; their total is reported (`dropped`), and stays
# far below any probability the table prints.
PRUNE = 1e-13


class PairLaw(BaseModel):
    """The chance that one pair is patch-only and that it is base-only; the rest agree."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    patch_only: float = Field(ge=0, le=1)
    base_only: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _a_distribution(self) -> PairLaw:
        if self.patch_only + self.base_only > 1 + 1e-12:
            raise ValueError(f"patch_only {self.patch_only} + base_only {self.base_only} exceed 1")
        return self

    @classmethod
    def independent(cls, base_rate: float, patch_rate: float) -> PairLaw:
        """The two sides' hits independent of each other within a pair."""
        _check_rates(base_rate, patch_rate)
        return cls(patch_only=patch_rate * (1 - base_rate), base_only=base_rate * (1 - patch_rate))

    @classmethod
    def shared(cls, base_rate: float, patch_rate: float) -> PairLaw:
        """The two sides hit together as often as their rates allow (one uniform draw decides both)."""
        _check_rates(base_rate, patch_rate)
        return cls(patch_only=max(0.0, patch_rate - base_rate), base_only=max(0.0, base_rate - patch_rate))

    @property
    def difference(self) -> float:
        """The patch's hit rate minus the base's."""
        return self.patch_only - self.base_only


def _check_rates(*rates: float) -> None:
    if any(not 0.0 <= rate <= 1.0 for rate in rates):
        raise ValueError(f"rates {rates} outside [0, 1]")


class PairedOCPoint(BaseModel):
    """The paired rule at one true law: outcome probabilities and pair counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    difference: float
    p_pass: float
    p_worse: float
    p_undecided: float  # still undecided at max_pairs
    expected_pairs: float
    p95_pairs: int
    dropped: float = 0.0  # probability of paths below PRUNE, left out of the figures above

    @property
    def p_inconclusive(self) -> float:
        """The chance of an inconclusive_sample verdict: worse or undecided."""
        return self.p_worse + self.p_undecided


def paired_characteristic(rule: PairedRule, law: PairLaw) -> PairedOCPoint:
    """The outcome probabilities and pair-count distribution of `rule` when pairs follow `law`."""
    up, down = law.patch_only, law.base_only
    agree = max(0.0, 1.0 - up - down)
    frontier: dict[tuple[int, int], float] = {(0, 0): 1.0}  # (patch-only, base-only) -> probability
    pairs = 0
    p_pass = p_worse = p_undecided = dropped = 0.0
    stopped: dict[int, float] = {}
    # The moves a pair can make, in a fixed order (the sums below add in the same order every time).
    moves = [(da, db, q) for da, db, q in ((0, 0, agree), (1, 0, up), (0, 1, down)) if q]
    while frontier:
        going: dict[tuple[int, int], float] = {}
        for (a, b), mass in frontier.items():
            # Counts built here are valid by construction: skipping validation halves the cost of a state.
            counts = PairCounts.model_construct(patch_only=a, base_only=b, both_pass=pairs - a - b, both_fail=0)
            state = rule.state(counts)
            if state is PairedState.CONTINUE:
                going[a, b] = mass
                continue
            stopped[pairs] = stopped.get(pairs, 0.0) + mass
            if state is PairedState.PASS:
                p_pass += mass
            elif state is PairedState.WORSE:
                p_worse += mass
            else:
                p_undecided += mass
        if not going:
            break
        wave = min(rule.wave, rule.max_pairs - pairs)
        for _ in range(wave):
            step: dict[tuple[int, int], float] = {}
            seen = step.get
            for (a, b), mass in going.items():
                for da, db, q in moves:
                    key = (a + da, b + db)
                    step[key] = seen(key, 0.0) + mass * q
            going = {}
            for key, mass in step.items():
                if mass < PRUNE:
                    dropped += mass
                else:
                    going[key] = mass
        pairs += wave
        frontier = going
    total = sum(stopped.values())
    expected = sum(n * m for n, m in stopped.items()) / total if total else 0.0
    cumulative, p95 = 0.0, max(stopped, default=0)
    for n in sorted(stopped):
        cumulative += stopped[n]
        if cumulative >= 0.95 * total - 1e-12:
            p95 = n
            break
    return PairedOCPoint(
        difference=law.difference,
        p_pass=p_pass,
        p_worse=p_worse,
        p_undecided=p_undecided,
        expected_pairs=expected,
        p95_pairs=p95,
        dropped=dropped,
    )


def paired_table(rule: PairedRule, base_rate: float, patch_rates: list[float], coupling: str) -> str:
    """The `gate power --rule paired` table: one row per patch rate against the one base rate."""
    make = PairLaw.shared if coupling == "shared" else PairLaw.independent
    head = f"{'patch':>6} {'diff':>7} {'P(pass)':>9} {'P(worse)':>9} {'P(undec)':>9} {'E[pairs]':>9} {'p95':>5}"
    rows = [head]
    for rate in patch_rates:
        pt = paired_characteristic(rule, make(base_rate, rate))
        rows.append(
            f"{rate:>6.3f} {pt.difference:>+7.3f} {pt.p_pass:>9.4f} {pt.p_worse:>9.4f} {pt.p_undecided:>9.4f} "
            f"{pt.expected_pairs:>9.1f} {pt.p95_pairs:>5d}"
        )
    return "\n".join(rows)
