"""Running the explain plan for one property: which trials to run next, when a variant has shown
enough, the trial budget, and the `Explanation` with its words.

The runner asks `next_chunk()` for a variant and a range of trial indices, runs those trials, and
hands their judged outcomes to `record`. Chunks start small (a cause shows in a few trials) and
double up to what a steady claim needs. Pure: outcomes in, an explanation out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gate.core.policy.explain import (
    BUDGET,
    STEADY_N,
    Explanation,
    Finding,
    Showed,
    Tried,
    alone,
    bound,
    plan,
    stop_rule,
)
from gate.core.policy.sources import ALL_FIXED, RESIDUAL, SOURCES, Source, Variant
from gate.core.policy.words import sentence
from gate.core.verdicts.verdict import Outcome, OutcomeKind

FIRST_CHUNK = 4  # two of each alternating value: enough for a cause that flickers half the time to show


@dataclass(frozen=True)
class Chunk:
    """Trials `start` .. `start + count - 1` of the explanation, run as `variant`."""

    variant: Variant
    start: int
    count: int


class Explainer:
    """The plan for one property, driven by the outcomes of its trials."""

    def __init__(self, property_id: str, *, steady_n: int = STEADY_N, budget: int = BUDGET) -> None:
        if steady_n < 1 or budget < steady_n:
            raise ValueError(f"needs 1 <= steady trials ({steady_n}) <= budget ({budget})")
        self.property_id = property_id
        self.steady_n, self.budget = steady_n, budget
        self.spent = 0
        self._plan = plan()
        self._shown: dict[Variant, Tried] = {}
        self._tried: list[Tried] = []
        self._current: list[Outcome] = []
        self._variant: Variant | None = self._plan.send(None)
        self._ended: tuple[Finding, frozenset[Source]] | None = None

    def next_chunk(self) -> Chunk | None:
        """The next trials to run, or None when the explanation is complete."""
        if self._variant is None:
            return None
        left = self.budget - self.spent
        if left <= 0:
            self._close(Showed.UNFINISHED)
            return None
        done = len(self._current)
        count = min(max(FIRST_CHUNK, done), self.steady_n + self._faults() - done, left)
        return Chunk(self._variant, self.spent, max(count, 1))

    def record(self, outcomes: Sequence[Outcome]) -> None:
        """The judged outcomes of the last chunk, in any order (the runner gives a lost trial as a fault)."""
        self.spent += len(outcomes)
        self._current.extend(outcomes)
        showed = stop_rule(self._current, self.steady_n)
        if showed is None and self._faults() >= self.steady_n:
            showed = Showed.UNFINISHED  # as many faults as a claim needs trials: the harness, not the probe
        if showed is not None:
            self._close(showed)

    def _faults(self) -> int:
        return sum(1 for o in self._current if o.kind is OutcomeKind.FAULT)

    def _close(self, showed: Showed) -> None:
        assert self._variant is not None
        tried = Tried.of(self._variant, self._current, showed)
        self._tried.append(tried)
        self._current = []
        if showed is Showed.UNFINISHED:
            self._variant = None
            self._ended = (Finding.UNEXPLAINED, frozenset())
            return
        self._shown[self._variant] = tried
        self._advance(showed is Showed.STEADY)

    def _advance(self, steady: bool) -> None:
        try:
            variant = self._plan.send(steady)
            while variant in self._shown:  # asked again: answered from what it showed
                variant = self._plan.send(self._shown[variant].showed is Showed.STEADY)
        except StopIteration as end:
            self._variant, self._ended = None, end.value
            return
        self._variant = variant

    def explanation(self) -> Explanation:
        """What the trials so far show (`unexplained` while the plan is still running)."""
        finding, found = self._ended or (Finding.UNEXPLAINED, frozenset())
        named = [s for s in SOURCES if s in found]
        fields: dict[str, object] = {}
        if finding is Finding.EXPLAINED:
            steady = self._shown[Variant(found)]
            fields = {
                "source": "+".join(named),
                "steady_with": steady,
                "flickers_with": tuple(self._shown[alone(s)] for s in named),
                "bound": bound(steady.hits + steady.misses + steady.timeouts),
            }
        elif finding is Finding.RESIDUAL:
            fields = {"source": RESIDUAL, "flickers_with": (self._shown[ALL_FIXED],)}
        draft = Explanation(
            property_id=self.property_id, finding=finding, trials=self.spent, tried=tuple(self._tried), **fields
        )
        return draft.model_copy(update={"words": sentence(draft, budget=self.budget)})
