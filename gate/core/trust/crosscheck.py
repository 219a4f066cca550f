"""Cross-checks: which trials run again on a second worker, and what a pair (or a tie-break) means.

A worker is trusted only as far as another worker agrees with it. The coordinator draws a seed no
worker sees and picks a share of each safety and contract property's trials from it (at least one
each); those trials, with the very same spec, run again on a worker other than the one that ran
them. The pair never yields a better outcome than either side (the first miss is kept); any
difference in outcome or in the raw facts (exit, signal, timeout, stream digests and lengths,
writes, canary) is a `WorkerDisagreement` naming both. A fact disagreement goes to a third worker,
which runs the trial twice: only when both of its runs reproduce one side exactly is the other side
quarantined; when its runs differ, or match neither side, the trial is nondeterministic (the probe
varies by itself: time, addresses, hash order) and nobody is quarantined, so a patch cannot turn its
own nondeterminism against an honest worker. Statistical trials are replayed with the same seed and
compared on their outcome instead (`gate.core.trust.replay`); each worker's hit rate is also compared
with the rest's (`gate.core.trust.hitrate`). Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from gate.core.suite.trial import Observation, TrialSpec
from gate.core.verdicts.verdict import Band, Outcome, OutcomeKind

REPRODUCE = 2  # runs of the tie-break worker that must agree before anyone is quarantined
CROSS_CHECK_BANDS = (Band.SAFETY, Band.CONTRACT)
_MODEL = ConfigDict(frozen=True, extra="forbid")

# How bad an outcome is for the patch, as the fold ranks it: a miss outranks a gap in the
# evidence (fault, then timeout), which outranks a hit.
RANK = {OutcomeKind.HIT: 0, OutcomeKind.TIMEOUT: 1, OutcomeKind.FAULT: 2, OutcomeKind.MISS: 3}


def picked(seed: str, property_id: str, trial_index: int, share: float) -> bool:
    """Whether the seed picks this trial: a keyed hash below `share`, unguessable without the seed."""
    return _point(seed, property_id, trial_index) < share


def _point(seed: str, property_id: str, trial_index: int) -> float:
    digest = hashlib.sha256(f"{seed}\0{property_id}\0{trial_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def choose(seed: str, trials: Mapping[str, tuple[Band, Sequence[int]]], share: float) -> dict[str, tuple[int, ...]]:
    """The trials to cross-check, by property: `share` of each safety/contract property's `trials`
    (indices with an observed outcome), and at least one of each when `share` > 0. Statistical: none."""
    chosen: dict[str, tuple[int, ...]] = {}
    if share <= 0:
        return chosen
    for property_id, (band, indices) in trials.items():
        if band not in CROSS_CHECK_BANDS or not indices:
            continue
        hit = tuple(sorted(i for i in indices if picked(seed, property_id, i, share)))
        # The minimum is the trial with the lowest point: as unguessable as the rest of the choice.
        chosen[property_id] = hit or (min(indices, key=lambda i: _point(seed, property_id, i)),)
    return chosen


FACTS = ("exit_code", "signal", "timed_out", "oom_killed", "stdout", "stderr", "writes", "canary_seen")


def facts(obs: Observation) -> dict[str, object]:
    """The facts a deterministic probe reproduces exactly on any honest worker (no times, no worker)."""
    return {
        "exit_code": obs.exit_code,
        "signal": obs.signal,
        "timed_out": obs.timed_out,
        "oom_killed": obs.oom_killed,
        # The claimed digest and length, and the returned head itself: a worker may claim either.
        "stdout": (obs.stdout.sha256, obs.stdout.length, hashlib.sha256(obs.stdout.data).hexdigest()),
        "stderr": (obs.stderr.sha256, obs.stderr.length, hashlib.sha256(obs.stderr.data).hexdigest()),
        "writes": tuple(sorted((w.path, str(w.change)) for w in obs.writes)),
        "canary_seen": obs.canary_seen,
    }


def differing(a: Observation, b: Observation) -> tuple[str, ...]:
    """The names of the facts on which two observations of one trial differ, in `FACTS` order."""
    fa, fb = facts(a), facts(b)
    return tuple(name for name in FACTS if fa[name] != fb[name])


def observed(obs: Observation) -> bool:
    """Whether a worker claims to have run the trial at all (a fault carries no facts to compare)."""
    return obs.fault is None


def worse(a: Outcome, b: Outcome) -> Outcome:
    """The outcome that counts of two for one trial: the worse for the patch; never better than either,
    and the same whichever came first (equal ranks fall back to a total order on the content)."""
    return max((a, b), key=lambda o: (RANK[o.kind], o.model_dump_json()))


class Side(BaseModel):
    """One worker's account of a trial in a disagreement: what it claimed, by digest."""

    model_config = _MODEL
    worker: str
    outcome: OutcomeKind
    exit_code: int | None = None
    stdout_sha256: str = ""
    stderr_sha256: str = ""
    writes: int = 0
    canary_seen: bool = False

    @classmethod
    def of(cls, obs: Observation, outcome: Outcome) -> Side:
        return cls(
            worker=obs.worker_id,
            outcome=outcome.kind,
            exit_code=obs.exit_code,
            stdout_sha256=obs.stdout.sha256,
            stderr_sha256=obs.stderr.sha256,
            writes=len(obs.writes),
            canary_seen=obs.canary_seen,
        )


class WorkerDisagreement(BaseModel):
    """Two workers' accounts of one trial that differ in outcome or in raw facts (sides by worker name)."""

    model_config = _MODEL
    property_id: str
    trial_index: int = Field(ge=0)
    sides: tuple[Side, Side]
    facts: tuple[str, ...] = ()  # names of the differing facts (`FACTS`); empty: the outcome alone differed
    counted: OutcomeKind  # the outcome that counts: the worse one

    def line(self) -> str:
        """`p trial 3: w1 hit vs w2 miss (stdout, writes); miss counts`."""
        a, b = self.sides
        what = f" ({', '.join(self.facts)})" if self.facts else ""
        return (
            f"{self.property_id} trial {self.trial_index}: {a.worker} {a.outcome} vs {b.worker} {b.outcome}"
            f"{what}; {self.counted} counts"
        )


class Pair(BaseModel):
    """A cross-checked trial: the observation and outcome that count, and the disagreement, if any."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")
    observation: Observation
    outcome: Outcome
    disagreement: WorkerDisagreement | None = None


def combine(first: tuple[Observation, Outcome], second: tuple[Observation, Outcome]) -> Pair:
    """Two workers' judged observations of one trial: the worse counts (its observation is kept with it,
    so a re-fold agrees), and any difference in outcome or facts is a disagreement naming both."""
    (oa, a), (ob, b) = first, second
    # Equal outcomes fall back to the observations' content, so the kept one does not depend on order.
    kept, counted = max(
        first, second, key=lambda pair: (RANK[pair[1].kind], pair[1].model_dump_json(), pair[0].model_dump_json())
    )
    differs = differing(oa, ob) if observed(oa) and observed(ob) else ()
    disagreement = None
    if a.kind is not b.kind or differs:
        sides = sorted((Side.of(oa, a), Side.of(ob, b)), key=lambda s: s.model_dump_json())
        disagreement = WorkerDisagreement(
            property_id=oa.property_id,
            trial_index=oa.trial_index,
            sides=(sides[0], sides[1]),
            facts=differs,
            counted=counted.kind,
        )
    return Pair(observation=kept, outcome=counted, disagreement=disagreement)


class Settled(StrEnum):
    QUARANTINE = "quarantine"  # a deterministic rerun on a third worker sided against one worker
    NONDETERMINISTIC = "nondeterministic"  # the trial's own facts vary between runs: nobody is blamed
    UNRESOLVED = "unresolved"  # no usable tie-break (no third worker, a fault, too few runs)


class Settlement(BaseModel):
    """What a tie-break made of a fact disagreement between `a` and `b`."""

    model_config = _MODEL
    property_id: str
    trial_index: int = Field(ge=0)
    settled: Settled
    quarantined: str | None = None  # the worker whose facts no rerun reproduced
    sided_with: str | None = None  # the worker whose facts the third worker reproduced
    tie_breaker: str | None = None
    detail: str = ""


def settle(a: Observation, b: Observation, reruns: Sequence[Observation]) -> Settlement:
    """The tie-break of a fact disagreement between `a` and `b` from a third worker's `reruns` of the
    same spec: quarantine only when `REPRODUCE` runs agree exactly with one side and not the other."""
    base = {"property_id": a.property_id, "trial_index": a.trial_index}
    others = {a.worker_id, b.worker_id}
    usable = [r for r in reruns if observed(r) and r.worker_id not in others]
    breakers = {r.worker_id for r in usable}
    if len(usable) < REPRODUCE or len(breakers) != 1:
        why = f"{len(usable)} usable rerun(s) from {len(breakers)} third worker(s); {REPRODUCE} from one needed"
        return Settlement(**base, settled=Settled.UNRESOLVED, detail=why)
    tie_breaker = breakers.pop()
    runs = [facts(r) for r in usable]
    if any(run != runs[0] for run in runs[1:]):
        other = next(r for r in usable[1:] if facts(r) != runs[0])
        why = f"{tie_breaker}'s own runs of the trial differ in {', '.join(differing(usable[0], other))}"
        return Settlement(**base, settled=Settled.NONDETERMINISTIC, tie_breaker=tie_breaker, detail=why)
    with_a, with_b = runs[0] == facts(a), runs[0] == facts(b)
    if with_a == with_b:  # matches neither (it cannot match both: a and b differ)
        why = f"{tie_breaker} reproduced neither side: three different results"
        return Settlement(**base, settled=Settled.NONDETERMINISTIC, tie_breaker=tie_breaker, detail=why)
    liar, honest = (b, a) if with_a else (a, b)
    return Settlement(
        **base,
        settled=Settled.QUARANTINE,
        quarantined=liar.worker_id,
        sided_with=honest.worker_id,
        tie_breaker=tie_breaker,
        detail=f"{tie_breaker} reproduced {honest.worker_id}'s facts {len(usable)} times; {liar.worker_id}'s differ",
    )


def settle_by_owner(a: Observation, b: Observation, trusted: frozenset[str]) -> Settlement | None:
    """A disagreement between an owned worker and another, settled with no third worker: the owned worker's facts
    stand and the other is quarantined (its results are then run again, on the owned worker where one is up).
    None when neither side, or both, is owned: the tie-break decides as before."""
    owned = [side for side in (a, b) if side.worker_id in trusted]
    if len(owned) != 1:
        return None
    honest = owned[0]
    liar = b if honest is a else a
    return Settlement(
        property_id=a.property_id,
        trial_index=a.trial_index,
        settled=Settled.QUARANTINE,
        quarantined=liar.worker_id,
        sided_with=honest.worker_id,
        tie_breaker=honest.worker_id,
        detail=f"{honest.worker_id} is an owned worker: its result stands over {liar.worker_id}'s",
    )


def canary_in_heads(spec: TrialSpec, obs: Observation) -> bool:
    """Whether the coordinator itself finds the trial's canary in the stream heads a worker returned."""
    if not spec.canary:
        return False
    needle = spec.canary.encode()
    return needle in obs.stdout.data or needle in obs.stderr.data


def with_coordinator_canary(spec: TrialSpec, obs: Observation) -> tuple[Observation, bool]:
    """`obs` with `canary_seen` set when the coordinator finds the canary in its heads, whatever the
    worker claimed; True when the worker had said it was not there (a worker that hid a leak)."""
    if obs.canary_seen or not canary_in_heads(spec, obs):
        return obs, False
    return obs.model_copy(update={"canary_seen": True}), True
