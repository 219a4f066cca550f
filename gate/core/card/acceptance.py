"""`accept` that proves what it accepts: the card's own claims (`gate.core.card.card.accept`), plus what
can be recomputed instead of believed — each row's kind from its outcome counts, the job's status,
exit code, ledger actions, votes and sampler window from the policy's recorded inputs — and what
binds the card to the tree and suite being merged. A card that disagrees with itself is refused,
naming the field; a consistent forgery is for signatures to stop (the card is data until signed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pydantic import TypeAdapter, ValidationError

from gate.core.card.card import Acceptance, DeadlineSource, PropertyRow, VerdictCard, accept
from gate.core.policy.freezes import FreezeFile, dependent_freeze_reasons, resolve
from gate.core.policy.policy import Decision, decide
from gate.core.verdicts.paired import AnyRule, PairedRule
from gate.core.verdicts.pairfold import paired_kind
from gate.core.verdicts.verdict import Band, Kind, Verdict, kind_of

_IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
_RULE: TypeAdapter[AnyRule] = TypeAdapter(AnyRule)


@dataclass(frozen=True)
class AcceptFacts:
    """What the merge decision needs besides the card, each read or recomputed from the tree being
    merged and its base (never taken from the card)."""

    seal_digest: str  # the base's seal file
    tree_digest: str  # the tree being merged, recomputed
    suite_sha256: str
    bands: Mapping[str, Band]  # every property of the whole suite
    freeze_file: FreezeFile | None  # the reviewed freeze file, as the base holds it
    base_commit: str | None  # the base the oracle was read from (None: no --base)
    oracle_edits: tuple[str, ...]  # oracle files the tree edits, recomputed against the base
    now: datetime  # accept's own time: a freeze that lapsed since the run excuses nothing
    allow_unchecked_oracle: bool = False
    allow_unenrolled_workers: bool = False
    allow_replayed_seeds: bool = False
    signature_problem: str | None = None  # why the card's signature fails, when one is required


def decide_merge(card: VerdictCard, facts: AcceptFacts) -> Acceptance:
    """The one accept path: what `gate accept` decides, and what `gate run` forecasts on its own card.
    `prove`, then the freezes at accept's time, the base, and the signature; every reason is kept."""
    result = prove(
        card,
        seal_digest=facts.seal_digest,
        tree_digest=facts.tree_digest,
        suite_sha256=facts.suite_sha256,
        bands=facts.bands,
        freezes=_freezes(facts.freeze_file, facts.bands, card),
        allow_unchecked_oracle=facts.allow_unchecked_oracle,
        allow_unenrolled_workers=facts.allow_unenrolled_workers,
        allow_replayed_seeds=facts.allow_replayed_seeds,
    )
    reasons = [] if result.accepted else list(result.reasons)
    excused = [row.id for row in card.properties if row.kind is not Kind.PASS]
    reasons += dependent_freeze_reasons(facts.freeze_file, frozen=card.freeze_set, excused=excused, now=facts.now)
    if facts.base_commit is not None:
        reasons += _base_reasons(card, facts.base_commit, facts.oracle_edits)
    if facts.signature_problem is not None:
        # An extra check, never a replacement: everything above was recomputed all the same.
        reasons.insert(0, facts.signature_problem)
    return Acceptance(accepted=not reasons, reasons=tuple(reasons) or result.reasons)


def _freezes(freeze_file: FreezeFile | None, bands: Mapping[str, Band], card: VerdictCard) -> dict[str, str]:
    """The freezes the reviewed freeze file puts in force for the card's seal at the card's time."""
    if freeze_file is None:
        return {}
    return resolve(freeze_file, bands=dict(bands), seal=card.fixture.seal, now=card.created_at).frozen


def _base_reasons(card: VerdictCard, commit: str, edits: tuple[str, ...]) -> list[str]:
    """What accept recomputed against the base itself: the card's base and oracle edits must agree."""
    reasons = []
    if card.base_rev != commit:
        reasons.append(f"the card's oracle came from base {card.base_rev}, not {commit}")
    if edits:
        reasons.append(f"the tree edits oracle files (recomputed against the base): {', '.join(edits)}")
    if tuple(card.new_oracle_edits) != edits:
        reasons.append("card disagrees with the base: new_oracle_edits differ from what accept recomputed")
    return reasons


def prove(
    card: VerdictCard,
    *,
    seal_digest: str,
    tree_digest: str | None,
    suite_sha256: str | None,
    bands: Mapping[str, Band] | None = None,
    freezes: Mapping[str, str] | None = None,
    allow_unchecked_oracle: bool = False,
    allow_unenrolled_workers: bool = False,
    allow_replayed_seeds: bool = False,
) -> Acceptance:
    """Accept only a card whose claims hold, whose recomputation agrees with it, that was made for
    this tree and suite (when given) with a row for each of the suite's properties (`bands`), in one
    real sandbox image, with the oracle checked, only enrolled workers' results and its own trial seeds
    (each unless allowed)."""
    reasons = [] if (claimed := accept(card, seal_digest)).accepted else list(claimed.reasons)
    if tree_digest is not None and card.tree_digest != tree_digest:
        reasons.append(f"the card was made for tree {card.tree_digest[:16]}, not this one ({tree_digest[:16]})")
    if suite_sha256 is not None and card.suite_sha256 != suite_sha256:
        reasons.append(f"the card was made for suite {card.suite_sha256[:16]}, not this one ({suite_sha256[:16]})")
    reasons += _selection_reasons(card, bands)
    if bands is not None:
        reasons += _row_reasons(card, bands)
    if freezes is not None and dict(card.freeze_set) != dict(freezes):
        # A freeze takes a property out of the vote: it must come from the reviewed freeze file.
        reasons.append(f"the card's freeze set {card.freeze_set} is not what the freeze file gives ({dict(freezes)})")
    if card.base_rev is None and not allow_unchecked_oracle:
        reasons.append("oracle edits were not checked (run without --base); refused unless --allow-unchecked-oracle")
    if card.unenrolled_workers and not allow_unenrolled_workers:
        reasons.append(
            "trials ran on unenrolled workers (run with --allow-unenrolled-workers and no worker registry: any "
            "process that could write to the broker could answer them); refused unless --allow-unenrolled-workers"
        )
    if card.seeds_from is not None and not allow_replayed_seeds:
        reasons.append(
            f"the trials drew the seeds of run {card.seeds_from} (--replay-seeds), not seeds of their own: draws "
            "chosen for a run could be chosen to pass; refused unless --allow-replayed-seeds"
        )
    reasons += _sandbox_reasons(card)
    reasons += recomputed_reasons(card)
    return Acceptance(accepted=not reasons, reasons=tuple(reasons) or claimed.reasons)


def _selection_reasons(card: VerdictCard, bands: Mapping[str, Band] | None) -> list[str]:
    """A card from a selection of the suite's properties (recorded, or shown by missing rows) cannot merge."""
    carded = [row.id for row in card.properties]
    partial = bands is not None and bool(carded) and set(carded) < set(bands)
    if card.selection is None and not partial:
        return []
    covered = ", ".join(card.selection if card.selection is not None else carded)
    return [f"the card covers a selection of the suite's properties ({covered}); run the whole suite to merge"]


def _row_reasons(card: VerdictCard, bands: Mapping[str, Band]) -> list[str]:
    """One row per property of the suite, in its band: a row deleted or relabelled is refused."""
    carded = {row.id: row.band for row in card.properties}
    reasons = [f"the card has no row for property {pid} of the suite" for pid in bands if pid not in carded]
    reasons += [f"the card has a row for {pid}, which the suite does not have" for pid in carded if pid not in bands]
    reasons += [
        f"row {pid} is in band {band} but the suite says {bands[pid]}"
        for pid, band in carded.items()
        if pid in bands and bands[pid] is not band
    ]
    if len(carded) != len(card.properties):
        reasons.append("the card lists a property twice")
    return reasons


def _sandbox_reasons(card: VerdictCard) -> list[str]:
    """Trials that ran must have run in exactly one real sandbox image."""
    if not any(row.trials for row in card.properties):
        return []
    if "," in card.image_id or any(e.kind == "mixed_images" for e in card.harness_events):
        return [f"trials ran in more than one image ({card.image_id})"]
    if not _IMAGE_ID.match(card.image_id):
        return [f"trials ran in no real sandbox image (image_id {card.image_id!r})"]
    return []


def recomputed_reasons(card: VerdictCard) -> list[str]:
    """Where the card disagrees with what its own recorded inputs yield, one reason per field."""
    reasons: list[str] = []
    verdicts: list[Verdict] = []
    for index, row in enumerate(card.properties):
        where = f"properties[{index}] ({row.id})"
        try:
            derived = _row_kind(row)
        except ValidationError as exc:
            reasons.append(f"card disagrees with itself: {where}.rule cannot be read back: {exc}")
            continue
        except ValueError as exc:
            reasons.append(f"card disagrees with itself: {where}: {exc}")
            continue
        if (row.counts.trials, row.counts.hit) != (row.trials, row.hits):
            reasons.append(
                f"card disagrees with itself: {where}.trials/hits {row.trials}/{row.hits} "
                f"but its counts add up to {row.counts.trials}/{row.counts.hit}"
            )
        if derived is not row.kind:
            reasons.append(f"card disagrees with itself: {where}.kind is {row.kind} but its counts give {derived}")
        reasons += _colour_reasons(row, where)
        verdicts.append(_verdict(row))
    if reasons:
        return reasons
    decision = decide(
        verdicts,
        frozen=card.freeze_set,
        ledger=card.policy.ledger(),
        window=card.policy.window_before,
        now=card.created_at,
        max_fault_share=card.policy.max_fault_share,
        oracle_edits=card.new_oracle_edits,
    )
    return _decision_reasons(card, decision)


def _colour_reasons(row: PropertyRow, where: str) -> list[str]:
    """A safety/contract row has a colour change exactly when its counts hold hits and misses, one index
    per counted trial on each side: a card cannot hide a flicker its counts show, nor claim one they lack."""
    flickered = row.band is not Band.STATISTICAL and row.counts.hit > 0 and row.counts.miss > 0
    change = row.colour_change
    if change is None:
        return [f"card disagrees with itself: {where} has hits and misses but no colour_change"] if flickered else []
    if not flickered or (len(set(change.hits)), len(set(change.misses))) != (row.counts.hit, row.counts.miss):
        return [
            f"card disagrees with itself: {where}.colour_change lists {len(change.hits)} hits and "
            f"{len(change.misses)} misses, its counts {row.counts.hit} and {row.counts.miss}"
        ]
    return []


def _row_kind(row: PropertyRow) -> Kind:
    """The kind the row's own counts give; a paired row's from its pair counts, whose recorded state
    must be the one they give (ValueError names what disagrees)."""
    rule = _RULE.validate_python(row.rule) if row.band is Band.STATISTICAL and row.rule is not None else None
    promoted = row.timeout_is_safety and row.deadline_source is DeadlineSource.CALIBRATED
    if isinstance(rule, PairedRule):
        if row.paired is None:
            raise ValueError("a paired rule's row has no pair counts")
        if (state := rule.state(row.paired.pairs)) is not row.paired.state:
            raise ValueError(f"paired.state is {row.paired.state} but its pair counts give {state}")
        return paired_kind(row.counts, row.paired, rule, promoted=promoted)
    if row.paired is not None:
        raise ValueError("pair counts on a row whose rule is not paired")
    return kind_of(row.counts, row.band, rule, promoted=promoted)


def _verdict(row: PropertyRow) -> Verdict:
    return Verdict(
        kind=row.kind,
        property_id=row.id,
        band=row.band,
        fixture_digest=row.fixture_digest,
        trials=row.trials,
        hits=row.hits,
        detail=row.detail,
        creditable=row.counts.creditable,
        counts=row.counts,
    )


def _decision_reasons(card: VerdictCard, decision: Decision) -> list[str]:
    reasons: list[str] = []

    def differs(field: str, carded: object, derived: object) -> None:
        if carded != derived:
            reasons.append(f"card disagrees with itself: {field} is {carded!r} but its inputs give {derived!r}")

    differs("status", str(card.status), str(decision.status))
    differs("exit_code", card.exit_code, decision.exit_code)
    differs("ledger_actions", card.ledger_actions, decision.ledger_actions)
    differs("window_after", card.window_after, decision.window.recent)
    differs("reasons", card.reasons, decision.reasons)
    for index, (row, vote) in enumerate(zip(card.properties, decision.votes, strict=True)):
        field = f"properties[{index}] ({row.id}).voting/frozen_by/ledger"
        differs(field, (row.voting, row.frozen_by, row.ledger), (vote.voting, vote.frozen_by, vote.ledger))
    return reasons
