"""What each source of nondeterminism means for a probe, the fix it usually needs, and the one
sentence an explanation puts in a repair task and a freeze reason. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from gate.core.policy.explain import Explanation, Finding, Showed, Tried, bound
from gate.core.policy.history import PairFlake
from gate.core.policy.sources import Source


class Words(NamedTuple):
    fixed: str  # how a variant holds the source fixed
    varied: str  # how it lets the source vary
    meaning: str  # what the outcome of a property this source moves depends on
    fix: str  # what such a property usually needs


WORDS: dict[Source, Words] = {
    Source.TRIAL_SEED: Words(
        "one trial seed",
        "a seed per trial",
        "the probe's random draws",
        "make the check hold for every draw, or fix the case a failing seed shows (gate run --replay-seeds replays it)",
    ),
    Source.HASH_SEED: Words(
        "one hash seed",
        "a fresh one per trial",
        "set or dict iteration order (str and bytes hashing)",
        "sort before comparing, or compare as sets",
    ),
    Source.ASLR: Words(
        "address randomisation off",
        "address randomisation on",
        "memory addresses (id(), the default hash of objects, reprs that show addresses)",
        "order by a key of the values, never by identity",
    ),
    Source.CPUS: Words(
        "the suite's CPUs",
        "an eighth of them every other trial",
        "how much CPU the trial gets (a deadline, a timeout or a race)",
        "wait on events instead of time, and leave the work room for the slowest machine",
    ),
    Source.CLOCK: Words(
        "the clock frozen",
        "the clock ticking from the frozen instant",
        "the wall clock moving",
        "read the clock once and compute from that reading, or pass the time in",
    ),
    Source.INTERPRETER: Words(
        "the suite's interpreter mode",
        "fresh and warm interpreters in turn",
        "state a warm interpreter carries (modules imported first, caches, global settings)",
        "import what the probe needs itself and reset the global state it changes",
    ),
}
RESIDUAL_MEANING = (
    "entropy the sandbox does not control (os.urandom, uuid4, secrets), the trial's index, or thread scheduling"
)
RESIDUAL_FIX = "draw randomness from PROBEGATE_TRIAL_SEED and join threads before comparing"


def sentence(explanation: Explanation, *, budget: int) -> str:
    """The explanation in words, with the fix its source usually needs."""
    finding = explanation.finding
    if finding is Finding.EXPLAINED and explanation.steady_with is not None:
        named = [Source(name) for name in explanation.source.split("+")]
        held = " and ".join(WORDS[s].fixed for s in named)
        shown = "; ".join(
            f"{tried.counts()} with {WORDS[s].varied}"
            for s, tried in zip(named, explanation.flickers_with, strict=True)
        )
        meaning = "the outcome depends on " + ", and on ".join(WORDS[s].meaning for s in named)
        fixes = "; ".join(WORDS[s].fix for s in named)
        return f"steady at {explanation.steady_with.counts()} with {held}, {shown}: {meaning}; {fixes}."
    if finding is Finding.RESIDUAL:
        [tried] = explanation.flickers_with
        return (
            f"changes colour ({tried.counts()}) with every source the sandbox controls held fixed: "
            f"{RESIDUAL_MEANING}; {RESIDUAL_FIX}."
        )
    if finding is Finding.STEADY:
        [tried] = explanation.tried
        rate = bound(tried.hits + tried.misses + tried.timeouts)
        return (
            f"steady at {tried.counts()} with every source varying: if it changes colour at all here, it does"
            f" in fewer than {rate:.1%} of trials (95%)."
        )
    return _unexplained(explanation.tried, spent=explanation.trials, budget=budget)


def _unexplained(tried: tuple[Tried, ...], *, spent: int, budget: int) -> str:
    if tried and tried[-1].showed is Showed.UNFINISHED:
        why = f"the budget of {budget} trials ran out" if spent >= budget else f"{tried[-1].faults} trials faulted"
        return f"not explained: {why} after {len(tried)} variants (what each showed is listed under tried)."
    return f"not explained: no source both held it steady and moved it alone, in {len(tried)} variants."


def named(explanation: Explanation) -> bool:
    """Whether the explanation names a cause: a source, or the residual."""
    return explanation.finding in (Finding.EXPLAINED, Finding.RESIDUAL)


def flake_line(flake: PairFlake, causes: Sequence[Explanation]) -> str:
    """A nightly pair's flake in one line, with its measured cause when one was named."""
    explanation = next((e for e in causes if e.property_id == flake.property_id), None)
    if explanation is None:
        return flake.line()
    said = explanation.source if named(explanation) else f"not explained ({explanation.finding})"
    return f"{flake.line()}; cause: {said}"
