"""The paired path of the HTML report: for each statistical property under the paired rule, the paired
test's log-likelihood ratio after each pair, from the trial records of both sides, against Wald's bounds.

Pairs are formed as the fold forms them (`gate.core.verdicts.pairfold.pair_up`): trial indices in order,
each judged (hit or miss) on the base tree and on the patched tree; the point after pair k is
`PairedRule.llr` of the first k pairs' counts, so the last point is the value the row's state was judged
on. Only a path whose pair counts equal the row's is drawn. Pure: records in, elements out, built with
`gate.core.report.html_dom`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from gate.core.card.card import PropertyRow
from gate.core.card.evidence import TrialRecord
from gate.core.report.html_dom import el, html_text, num
from gate.core.report.html_llr import llr_plot
from gate.core.suite.trial import Side
from gate.core.verdicts.paired import PairCounts, PairedRule
from gate.core.verdicts.pairfold import pair_up
from gate.core.verdicts.verdict import Outcome


@dataclass(frozen=True)
class PairedPath:
    """One paired property's llr after each pair, in trial-index order, and the pair counts at the end."""

    rule: PairedRule
    points: tuple[float, ...]
    counts: PairCounts

    @property
    def final(self) -> float:
        return self.points[-1] if self.points else 0.0


def paired_path(rule: PairedRule, base: Sequence[Outcome], patch: Sequence[Outcome]) -> PairedPath:
    """The llr after each pair the two sides' outcomes make, pairs taken in trial-index order."""
    held = {o.trial_index: o for o in base}
    points: list[float] = []
    counts = PairCounts()
    for outcome in sorted(patch, key=lambda o: o.trial_index):
        other = held.get(outcome.trial_index)
        if other is None:
            continue
        step = pair_up([other], [outcome])
        if not step.pairs:
            continue  # a timeout or fault on either side makes no pair
        counts = PairCounts(
            both_pass=counts.both_pass + step.both_pass,
            both_fail=counts.both_fail + step.both_fail,
            base_only=counts.base_only + step.base_only,
            patch_only=counts.patch_only + step.patch_only,
        )
        points.append(rule.llr(counts))
    return PairedPath(rule=rule, points=tuple(points), counts=counts)


def draw_paired_paths(
    body: ET.Element, rows: Sequence[tuple[int, PropertyRow, PairedRule]], records: Sequence[TrialRecord]
) -> None:
    """A heading, then per row (card index, row, its paired rule) its path as `svg#paired-<index>`, or a
    note saying why none is drawn (no records given, no pair formed, records that disagree with the row)."""
    el(body, "h2", "Paired test: log-likelihood ratio after each pair (base against patch)")
    if not records and any(row.trials for _, row, _ in rows):
        text = "The trial records (the evidence beside the card) were not given to the report: no paired path is drawn."
        el(body, "p", text, id="paired-no-evidence")
        return
    sides: dict[tuple[str, Side], list[Outcome]] = {}
    for record in records:
        sides.setdefault((record.property_id, record.side), []).append(record.outcome)
    for index, row, rule in rows:
        path = paired_path(rule, sides.get((row.id, Side.BASE), ()), sides.get((row.id, Side.PATCH), ()))
        recorded = row.paired.pairs if row.paired is not None else PairCounts()
        if not path.points:
            _note(body, index, row, f"{row.id}: no pair was judged on both trees, no path to draw.")
        elif path.counts != recorded:
            text = (
                f"{row.id}: the records make {path.counts.pairs} pairs but the row records {recorded.pairs} "
                "(or other counts): no path drawn."
            )
            _note(body, index, row, text)
        else:
            _plot(body, index, row, path)


def _note(body: ET.Element, index: int, row: PropertyRow, text: str) -> None:
    el(body, "p", html_text(text, 400), id=f"paired-{index}", **{"class": "paired-note"}, data_property=row.id)


def _plot(body: ET.Element, index: int, row: PropertyRow, path: PairedPath) -> None:
    paired_plot(body, f"paired-{index}", row.id, path, kind=str(row.kind))
    el(body, "p", paired_caption(path), **{"class": "paired-caption"}, data_property=row.id)


def paired_plot(body: ET.Element, slug: str, property_id: str, path: PairedPath, *, kind: str | None = None) -> None:
    """`path` (at least one pair) as `svg#<slug>`: a polyline, one point per pair, between the worse (A) and
    no-worse (B) lines; `kind`, the row's verdict kind when there is one (a live run has none yet)."""
    rule = path.rule
    decision = rule.decide(path.counts)
    data = {"kind": kind} if kind is not None else {}
    data |= {"pairs": str(len(path.points)), "final_llr": num(path.final)}
    data |= {"upper": num(rule.upper), "lower": num(rule.lower), "difference": num(decision.difference)}
    data["decision"] = str(decision.state)
    title = "paired log-likelihood ratio after each pair against A and B"
    llr_plot(body, slug, property_id, path.points, (rule.lower, rule.upper), step="pair", title=title, data=data)


def paired_caption(path: PairedPath, *, live: bool = False) -> str:
    """What the path says (the rule's reason for its counts) and what A and B mean; `live`: the run is still
    judging, so the counts are those so far."""
    rule = path.rule
    so_far = "So far: " if live else ""
    return (
        f"{so_far}{html_text(rule.decide(path.counts).reason, 600)}. A: worse than the base by {rule.margin}; "
        f"B: no worse. The run checks the test only after each wave of {rule.wave} pairs, so the path may cross a "
        "line between checks."
    )
