"""The fold of a paired property: the patch's and the base's outcomes of the same trial indices into
pairs, and the pairs (with both sides' counts) into one verdict. `paired_kind` is the whole decision on
counts alone, so `accept` re-derives it from the card exactly as the run did.

Precedence, as in `gate.core.verdicts.verdict.kind_of`: a promoted timeout of the patch outranks a
fault on either side, which outranks a timeout on either side (a pair cannot form without both), which
outranks the paired test. A base fault or timeout never passes the patch: the row cannot be decided.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.core.verdicts.bands import wilson
from gate.core.verdicts.paired import PairCounts, PairedRule, PairedState
from gate.core.verdicts.verdict import (
    Band,
    Kind,
    Outcome,
    OutcomeCounts,
    OutcomeKind,
    PairedEvidence,
    Verdict,
    first_misses,
    first_outcome,
)

_JUDGED = (OutcomeKind.HIT, OutcomeKind.MISS)


def pair_up(base: Sequence[Outcome], patch: Sequence[Outcome]) -> PairCounts:
    """The pairs of trial indices judged (hit or miss) on both sides; an index on one side only makes none."""
    held = {o.trial_index: o.kind is OutcomeKind.HIT for o in base if o.kind in _JUDGED}
    return PairCounts.of(
        [(held[o.trial_index], o.kind is OutcomeKind.HIT) for o in patch if o.kind in _JUDGED and o.trial_index in held]
    )


def pairs_disagree(patch: OutcomeCounts, evidence: PairedEvidence) -> str | None:
    """Why the pair counts cannot come from these two sides' counts, or None when they can.

    Only a row with no fault or timeout on either side is decided by its pairs; then every trial is in
    exactly one pair, so each side's hits and misses are sums of pair cells."""
    base, pairs = evidence.base, evidence.pairs
    sides = {
        "patch hits": (patch.hit, pairs.both_pass + pairs.patch_only),
        "patch misses": (patch.miss, pairs.both_fail + pairs.base_only),
        "base hits": (base.hit, pairs.both_pass + pairs.base_only),
        "base misses": (base.miss, pairs.both_fail + pairs.patch_only),
    }
    wrong = [f"{name} {count} but the pairs give {given}" for name, (count, given) in sides.items() if count != given]
    return "; ".join(wrong) or None


def paired_kind(patch: OutcomeCounts, evidence: PairedEvidence, rule: PairedRule, *, promoted: bool = False) -> Kind:
    """The kind a paired row's counts earn (precedence in the module docstring); raises ValueError when
    the pairs do not add up to the two sides' counts."""
    base = evidence.base
    if patch.trials == 0:
        return Kind.HARNESS_ERROR
    if patch.timeout and promoted:
        return Kind.FAIL_SAFETY
    if patch.fault or base.fault:
        return Kind.HARNESS_ERROR
    if patch.timeout or base.timeout:
        return Kind.INCONCLUSIVE_TIMEOUT
    if (problem := pairs_disagree(patch, evidence)) is not None:
        raise ValueError(f"pair counts do not add up: {problem}")
    return Kind.PASS if rule.state(evidence.pairs) is PairedState.PASS else Kind.INCONCLUSIVE_SAMPLE


def fold_paired(
    *,
    property_id: str,
    fixture_digest: str,
    patch: Sequence[Outcome],
    base: Sequence[Outcome],
    rule: PairedRule,
    timeout_is_safety: bool = False,
) -> Verdict:
    """A paired property's verdict from the patch's and the base's judged trials of the same indices."""
    counts, base_counts = OutcomeCounts.of(patch), OutcomeCounts.of(base)
    pairs = pair_up(base, patch)
    decision = rule.decide(pairs)
    evidence = PairedEvidence(base=base_counts, pairs=pairs, state=decision.state)
    kind = paired_kind(counts, evidence, rule, promoted=timeout_is_safety)
    detail = _detail(kind, patch, base) or decision.reason + first_misses(patch)
    both_faults = [o for o in (*patch, *base) if o.kind is OutcomeKind.FAULT]
    return Verdict(
        kind=kind,
        property_id=property_id,
        band=Band.STATISTICAL,
        fixture_digest=fixture_digest,
        trials=counts.trials,
        hits=counts.hit,
        detail=detail,
        interval=wilson(counts.hit, counts.trials) if patch else None,
        creditable=kind is Kind.HARNESS_ERROR and bool(both_faults) and all(o.creditable for o in both_faults),
        check_raised=any(o.check_raised for o in patch),
        counts=counts,
        paired=evidence,
    )


def _detail(kind: Kind, patch: Sequence[Outcome], base: Sequence[Outcome]) -> str:
    """What explains a kind the pairs did not decide, naming the side; empty when the pairs decided."""
    if not patch:
        return "no trial was observed"
    wanted = {
        Kind.FAIL_SAFETY: OutcomeKind.TIMEOUT,
        Kind.HARNESS_ERROR: OutcomeKind.FAULT,
        Kind.INCONCLUSIVE_TIMEOUT: OutcomeKind.TIMEOUT,
    }.get(kind)
    if wanted is None:
        return ""
    ours = [o for o in patch if o.kind is wanted]
    if ours:
        prefix = "deadline fired (timeout_is_safety): " if kind is Kind.FAIL_SAFETY else ""
        return prefix + first_outcome(ours)
    return "on the base: " + first_outcome([o for o in base if o.kind is wanted]) + " (the pair cannot be judged)"
