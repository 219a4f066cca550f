"""The sources of nondeterminism a probe can see in the sandbox, and how `gate flakes explain` holds
each one fixed or lets it vary from trial to trial.

A `Variant` names the sources it holds fixed; every other source varies. `vary` turns a planned
trial into that variant's trial: the same property, tree, fixture and image, with the knobs of the
spec (`TrialSpec.seed`, `hash_seed`, `interpreter`, `clock_ticks`, `aslr`, `limits.cpus`) set as the
variant says. Whatever the sandbox does not control (`os.urandom`, `uuid4`, thread scheduling) is
the residual: it varies in every variant. Pure: specs in, specs out.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from gate.core.suite.trial import MAX_HASH_SEED, Interpreter, TrialSpec

RESIDUAL = "residual"  # what no variant can hold fixed: entropy and scheduling the sandbox does not control
# A busy neighbour's share: with the suite's CPUs cut to this fraction, a trial sees the contention of
# running beside busy trials, on any machine, through any worker.
CONTENDED_SHARE = 1 / 8


class Source(StrEnum):
    """One source of nondeterminism the sandbox can hold fixed, in the order the search tries them
    (the ones that vary in an ordinary run first)."""

    TRIAL_SEED = "trial_seed"  # PROBEGATE_TRIAL_SEED: one for all trials, or one per trial
    HASH_SEED = "hash_seed"  # PYTHONHASHSEED: one, or a fresh one per trial
    ASLR = "aslr"  # address-space layout randomisation: off, or on (id() and default hash order)
    CPUS = "cpus"  # the suite's CPUs alone, or alternately an eighth of them (timing, deadlines)
    CLOCK = "clock"  # the wall clock frozen at the sealed instant, or ticking from it
    INTERPRETER = "interpreter"  # the suite's interpreter mode, or alternately fresh and warm


SOURCES: tuple[Source, ...] = tuple(Source)


@dataclass(frozen=True)
class Variant:
    """A way to run a property's trials: `fixed` sources are held at one value; the rest vary."""

    fixed: frozenset[Source]

    @property
    def varied(self) -> frozenset[Source]:
        return frozenset(SOURCES) - self.fixed

    def label(self) -> str:
        """`fixed: trial_seed, hash_seed; varied: …` in the search's order."""
        fixed = ", ".join(s for s in SOURCES if s in self.fixed) or "none"
        varied = ", ".join(s for s in SOURCES if s not in self.fixed) or "none"
        return f"fixed: {fixed}; varied: {varied}"


ALL_VARY = Variant(frozenset())
ALL_FIXED = Variant(frozenset(SOURCES))


def vary(spec: TrialSpec, variant: Variant, *, fixed_seed: int) -> TrialSpec:
    """`spec` as `variant` runs it: fixed sources at one value (`fixed_seed` is the trial seed all
    trials share), varied ones drawn from the trial's own seed and index."""
    index, own = spec.trial_index, spec.seed
    fixed = variant.fixed
    alternate = index % 2 == 1  # two-valued sources alternate, so any four trials hold both values
    interpreter = spec.interpreter
    if Source.INTERPRETER not in fixed:
        interpreter = Interpreter.WARM if alternate else Interpreter.FRESH
    cpus = spec.limits.cpus
    if Source.CPUS not in fixed and alternate:
        cpus = cpus * CONTENDED_SHARE
    return spec.model_copy(
        update={
            "seed": fixed_seed if Source.TRIAL_SEED in fixed else own,
            "hash_seed": hash_seed(fixed_seed if Source.HASH_SEED in fixed else own),
            "interpreter": interpreter,
            "clock_ticks": Source.CLOCK not in fixed,
            "aslr": Source.ASLR not in fixed,
            "limits": spec.limits.model_copy(update={"cpus": cpus}),
        }
    )


def hash_seed(seed: int) -> int:
    """A PYTHONHASHSEED drawn from a trial seed, independent of it (1..2**32-1: 0 turns hashing off)."""
    digest = hashlib.sha256(b"probegate-hash-seed:" + str(seed).encode("ascii")).digest()
    return 1 + int.from_bytes(digest[:8], "big") % MAX_HASH_SEED
