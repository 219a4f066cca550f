"""What changed between two verdict cards: the card-level bindings and each property's row, matched
by id. Pure; `gate diff` (gate.cli.diff) reads the cards and prints `CardDiff.to_text()` or its JSON.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable

from pydantic import BaseModel, ConfigDict, JsonValue

from gate.core.card.card import PropertyRow, VerdictCard
from gate.core.escaping import one_line

_DIFF = ConfigDict(frozen=True, extra="forbid")


class FieldChange(BaseModel):
    """One field whose value differs: its name and the JSON value on each card (null: absent)."""

    model_config = _DIFF
    field: str
    a: JsonValue
    b: JsonValue


class PropertyDiff(BaseModel):
    """The fields that differ in one property's row; `occurrence` > 1 only for an id a card repeats."""

    model_config = _DIFF
    id: str
    occurrence: int = 1
    changes: tuple[FieldChange, ...]


class CardDiff(BaseModel):
    """Everything that differs between card A and card B; empty when they agree on every compared field."""

    model_config = _DIFF
    card: tuple[FieldChange, ...] = ()
    properties: tuple[PropertyDiff, ...] = ()
    added: tuple[str, ...] = ()  # property ids only card B has
    removed: tuple[str, ...] = ()  # property ids only card A has

    @property
    def same(self) -> bool:
        """Whether the cards agree on every compared field but durations, which differ on every run."""
        decisive = any(c.field not in TIMING_FIELDS for prop in self.properties for c in prop.changes)
        return not (self.card or decisive or self.added or self.removed)

    def to_text(self) -> str:
        """One line per difference, every card-supplied string escaped; "no differences" when none."""
        if not (self.card or self.properties or self.added or self.removed):
            return "no differences\n"
        lines = [_change_line(change, "") for change in self.card]
        for prop in self.properties:
            label = one_line(prop.id) + (f" [{prop.occurrence}]" if prop.occurrence > 1 else "")
            lines.append(f"property {label}:")
            lines.extend(_change_line(change, "  ") for change in prop.changes)
        lines.extend(f"added property: {one_line(pid)}" for pid in self.added)
        lines.extend(f"removed property: {one_line(pid)}" for pid in self.removed)
        if self.same:
            lines.append("only durations differ")
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """The diff as one JSON line, ASCII only: bidi marks, C1 controls and U+2028 arrive as \\u escapes."""
        # model_dump_json writes NaN as null and non-ASCII raw; json.dumps then escapes the non-ASCII.
        return json.dumps(json.loads(self.model_dump_json())) + "\n"


# The card-level fields compared, each read out of a card as a JSON value. Run id, creation time and
# paths differ on every run, so listing them would bury what changed; they are left out.
_CARD_FIELDS: dict[str, Callable[[VerdictCard], JsonValue]] = {
    "fixture.seal": lambda c: c.fixture.seal,
    "tree_digest": lambda c: c.tree_digest,
    "image_id": lambda c: c.image_id,
    "suite_sha256": lambda c: c.suite_sha256,
    "status": lambda c: str(c.status),
    "exit_code": lambda c: c.exit_code,
    "new_oracle_edits": lambda c: list(c.new_oracle_edits),
    "base_rev": lambda c: c.base_rev,
    "proposed_freezes": lambda c: list(c.flake_files.freeze_ids) if c.flake_files else [],
}


def _rate(row: PropertyRow) -> JsonValue:
    return row.hits / row.trials if row.trials > 0 else None


def _median(row: PropertyRow) -> JsonValue:
    return statistics.median(row.durations_s) if row.durations_s else None


def _max(row: PropertyRow) -> JsonValue:
    return max(row.durations_s) if row.durations_s else None


# Timing fields are shown but do not make two cards differ: the same tree gives new durations each run.
TIMING_FIELDS = frozenset({"duration_median_s", "duration_max_s"})
_ROW_FIELDS: dict[str, Callable[[PropertyRow], JsonValue]] = {
    "kind": lambda r: str(r.kind),
    "band": lambda r: str(r.band),
    "trials": lambda r: r.trials,
    "hits": lambda r: r.hits,
    "hit_rate": _rate,
    "interval": lambda r: r.interval.model_dump(mode="json") if r.interval else None,
    "duration_median_s": _median,
    "duration_max_s": _max,
    "detail": lambda r: r.detail,
    "colour_change": lambda r: r.colour_change.model_dump(mode="json") if r.colour_change else None,
    "base_rerun": lambda r: str(r.base_rerun.verdict) if r.base_rerun else None,
}


def diff_cards(a: VerdictCard, b: VerdictCard) -> CardDiff:
    """What differs from card A to card B: card-level bindings, then rows matched by property id."""
    card = [_change(name, read(a), read(b)) for name, read in _CARD_FIELDS.items()]
    for fid in sorted(a.freeze_set.keys() | b.freeze_set.keys()):
        card.append(_change(f"freeze_set.{fid}", a.freeze_set.get(fid), b.freeze_set.get(fid)))
    rows_a, rows_b = _keyed(a.properties), _keyed(b.properties)
    properties = []
    for key, row_a in rows_a.items():
        row_b = rows_b.get(key)
        if row_b is None:
            continue
        changes = [_change(name, read(row_a), read(row_b)) for name, read in _ROW_FIELDS.items()]
        found = tuple(c for c in changes if c is not None)
        if found:
            properties.append(PropertyDiff(id=key[0], occurrence=key[1], changes=found))
    return CardDiff(
        card=tuple(c for c in card if c is not None),
        properties=tuple(properties),
        added=tuple(pid for pid, n in rows_b if (pid, n) not in rows_a),
        removed=tuple(pid for pid, n in rows_a if (pid, n) not in rows_b),
    )


def _keyed(rows: Iterable[PropertyRow]) -> dict[tuple[str, int], PropertyRow]:
    """Rows by (id, occurrence): a hand-edited card may repeat an id, and no row may hide behind another."""
    seen: dict[str, int] = {}
    keyed: dict[tuple[str, int], PropertyRow] = {}
    for row in rows:
        seen[row.id] = seen.get(row.id, 0) + 1
        keyed[(row.id, seen[row.id])] = row
    return keyed


def _change(field: str, a: JsonValue, b: JsonValue) -> FieldChange | None:
    """The change of one field, or None when both cards hold the same value (NaN equals NaN here)."""
    if a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
        return None
    return FieldChange(field=field, a=a, b=b)


def _change_line(change: FieldChange, indent: str) -> str:
    return f"{indent}{one_line(change.field)}: {show_value(change.a)} -> {show_value(change.b)}"


def show_value(value: JsonValue) -> str:
    """A JSON value on one line for people; strings escaped, so a card cannot add a line or a colour."""
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return one_line(value) if value else '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{one_line(k)}={show_value(v)}" for k, v in value.items()) + "}"
    return str(value)
