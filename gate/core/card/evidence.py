"""Evidence: every judged trial kept by content, and the re-fold that checks a card against it.

A `TrialRecord` is one trial's observation and its judged outcome. Its canonical bytes
(`record_bytes`) name it (`record_digest`), and the card binds the set of names (`evidence_digest`),
so `gate refold` can re-fold the outcomes with the card's own band rules and compare kinds, trials
and hits with the rows. A paired row's records hold both sides (each observation names its side); its
re-fold pairs them again, as the run did. Pure: reading and writing the store is `gate.io.evidence`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from gate.core.card.card import DeadlineSource, PropertyRow, VerdictCard
from gate.core.escaping import one_line
from gate.core.suite.trial import Observation, Side
from gate.core.verdicts.paired import AnyRule, PairedRule
from gate.core.verdicts.pairfold import fold_paired
from gate.core.verdicts.verdict import Band, Kind, Outcome, Verdict, fold, harness_verdict

_RULE: TypeAdapter[AnyRule] = TypeAdapter(AnyRule)


class TrialRecord(BaseModel):
    """One trial as the run saw and judged it: the observation (exit facts, captured stream heads with
    their full length and sha256, writes, worker, image) and the outcome the check gave it."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")
    property_id: str
    trial_index: int = Field(ge=0)
    observation: Observation
    outcome: Outcome

    @model_validator(mode="after")
    def _one_trial(self) -> TrialRecord:
        obs = self.observation
        if (obs.property_id, obs.trial_index, self.outcome.trial_index) != (
            self.property_id,
            self.trial_index,
            self.trial_index,
        ):
            raise ValueError("the observation, the outcome and the record name different trials")
        return self

    @property
    def side(self) -> Side:
        """The tree the trial ran on (a paired property's base trials are recorded beside the patch's)."""
        return self.observation.side


def record_bytes(record: TrialRecord) -> bytes:
    """The canonical bytes of a record: its JSON model dump (bytes as base64) with sorted keys, no
    whitespace (`","` and `":"` separators) and every non-ASCII character escaped, encoded as ASCII."""
    data = record.model_dump(mode="json")
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def record_digest(record: TrialRecord) -> str:
    """The record's name in the store: the lowercase hex sha256 of `record_bytes`."""
    return hashlib.sha256(record_bytes(record)).hexdigest()


def evidence_digest(digests: Iterable[str]) -> str:
    """The digest a card binds: sha256 over the distinct record digests (lowercase hex), sorted
    ascending, each followed by one newline, as ASCII — `sha256("".join(d + "\\n" for d in
    sorted(set(digests))))`. No record at all gives the sha256 of the empty string."""
    text = "".join(f"{digest}\n" for digest in sorted(set(digests)))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class RowCheck:
    """One card row against the re-fold of its property's records: kind, trials and hits of each."""

    property_id: str
    card: tuple[Kind, int, int]
    refolded: tuple[Kind, int, int] | None
    problem: str = ""  # why the records could not be re-folded (refolded is then None)

    @property
    def agrees(self) -> bool:
        return self.card == self.refolded

    def line(self) -> str:
        if self.refolded is None:
            return f"{self.property_id}: DIFFERS: {self.problem}"
        kind, trials, hits = self.refolded
        if self.agrees:
            return f"{self.property_id}: agrees ({kind}, {hits}/{trials} hits)"
        ckind, ctrials, chits = self.card
        return (
            f"{self.property_id}: DIFFERS: card says {ckind} {chits}/{ctrials} hits, "
            f"the records fold to {kind} {hits}/{trials} hits"
        )


@dataclass(frozen=True)
class Refold:
    """Every row checked, plus the properties that have records but no row on the card."""

    rows: tuple[RowCheck, ...]
    unbound: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return not self.unbound and all(row.agrees for row in self.rows)

    def lines(self) -> list[str]:
        shown = [row.line() for row in self.rows]
        return shown + [f"{pid}: DIFFERS: records for a property the card has no row for" for pid in self.unbound]


def refold(card: VerdictCard, records: Sequence[TrialRecord]) -> Refold:
    """Re-fold each row's records with the fold the run used (band and rule from the row; a timeout
    promoted only on a calibrated deadline) and compare kind, trials and hits with the row."""
    by_property: dict[str, list[TrialRecord]] = {}
    for record in records:
        by_property.setdefault(record.property_id, []).append(record)
    checks = tuple(_check(row, by_property.get(row.id, [])) for row in card.properties)
    rows = {row.id for row in card.properties}
    return Refold(rows=checks, unbound=tuple(sorted(set(by_property) - rows)))


def _check(row: PropertyRow, records: Sequence[TrialRecord]) -> RowCheck:
    card = (row.kind, row.trials, row.hits)
    ordered = sorted(records, key=lambda r: (r.trial_index, r.side))
    keys = [(r.trial_index, r.side) for r in ordered]
    twice = sorted({index for index, side in keys if keys.count((index, side)) > 1})
    if twice:
        return RowCheck(row.id, card, None, f"trial(s) {twice} recorded more than once")
    try:
        rule = _RULE.validate_python(row.rule) if row.band is Band.STATISTICAL and row.rule is not None else None
        if not isinstance(rule, PairedRule) and any(r.side is Side.BASE for r in ordered):
            return RowCheck(row.id, card, None, "base-tree trials recorded for a row whose rule is not paired")
        verdict = _refolded(row, ordered, rule)
    except ValueError as exc:  # pydantic's ValidationError is one; so is a statistical row without a rule
        return RowCheck(row.id, card, None, f"the row's band rule cannot be read back: {one_line(str(exc))[:200]}")
    return RowCheck(row.id, card, (verdict.kind, verdict.trials, verdict.hits))


def _refolded(row: PropertyRow, ordered: Sequence[TrialRecord], rule: AnyRule | None) -> Verdict:
    """The verdict the run's fold gives these records (a paired rule's both sides, paired again)."""
    promoted = row.timeout_is_safety and row.deadline_source is DeadlineSource.CALIBRATED
    if not isinstance(rule, PairedRule):
        outcomes = [r.outcome for r in ordered]
        return fold(
            property_id=row.id,
            band=row.band,
            fixture_digest=row.fixture_digest,
            outcomes=outcomes,
            rule=rule,
            timeout_is_safety=promoted,
        )
    patch = [r.outcome for r in ordered if r.side is Side.PATCH]
    base = [r.outcome for r in ordered if r.side is Side.BASE]
    if {o.trial_index for o in patch} != {o.trial_index for o in base}:
        # The run folds a trial index one side never reported as a harness_error with no trials (gate.core.suite.fold).
        return harness_verdict(row.id, row.band, row.fixture_digest, "a side never reported", creditable=False)
    return fold_paired(
        property_id=row.id,
        fixture_digest=row.fixture_digest,
        patch=patch,
        base=base,
        rule=rule,
        timeout_is_safety=promoted,
    )
