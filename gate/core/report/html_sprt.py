"""The SPRT path of the HTML report: for each statistical property whose rule is Wald's SPRT, the
log-likelihood ratio after each trial, from the trial records, against the two boundaries.

Trials are taken in trial-index order and counted as the fold counts them (`OutcomeCounts`): every
trial is one of `trials`, only a hit is one of `hits`, so a miss, a timeout and a fault each add the
rule's `miss_step`, and the last point is `SprtRule.llr(row.hits, row.trials)`, the value
`SprtRule.state` judges. The fold lets the rule decide only a row with no timeout and no fault
(`kind_of` settles those first); such a row's path is still drawn, and its caption says that its
verdict did not come from the SPRT. Pure: records in, elements out, built with `gate.core.report.html_dom`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gate.core.card.card import PropertyRow
from gate.core.card.evidence import TrialRecord
from gate.core.report.html_dom import el, html_text, num
from gate.core.report.html_llr import LABEL_CHARS, llr_plot
from gate.core.verdicts.bands import SprtRule, SprtState
from gate.core.verdicts.verdict import Outcome, OutcomeKind


@dataclass(frozen=True)
class SprtPath:
    """One property's llr after each of its trials, in trial-index order, with the counts behind it."""

    rule: SprtRule
    points: tuple[float, ...]
    hits: int
    gaps: int  # timeouts and faults, counted (as the fold counts them) as trials that are not hits

    @property
    def trials(self) -> int:
        return len(self.points)

    @property
    def final(self) -> float:
        """The llr after the last trial (0 before any)."""
        return self.points[-1] if self.points else 0.0

    @property
    def decision(self) -> SprtState:
        """What the rule says of the counts: pass, below, undecided (at the cap) or open."""
        return self.rule.state(self.hits, self.trials)


def sprt_path(rule: SprtRule, outcomes: Iterable[Outcome]) -> SprtPath:
    """The llr path of `outcomes` in trial-index order, each trial counted as the fold counts it."""
    return kinds_path(rule, [o.kind for o in sorted(outcomes, key=lambda o: o.trial_index)])


def kinds_path(rule: SprtRule, kinds: Sequence[OutcomeKind]) -> SprtPath:
    """The llr path of trials that came out as `kinds`, already in trial-index order."""
    return SprtPath(
        rule=rule,
        points=rule.llr_path(kind is OutcomeKind.HIT for kind in kinds),
        hits=sum(1 for kind in kinds if kind is OutcomeKind.HIT),
        gaps=sum(1 for kind in kinds if kind in (OutcomeKind.TIMEOUT, OutcomeKind.FAULT)),
    )


def draw_sprt_paths(
    body: ET.Element, rows: Sequence[tuple[int, PropertyRow, SprtRule]], records: Sequence[TrialRecord]
) -> None:
    """A heading, then per row (card index, row, its SPRT rule) its path as `svg#sprt-<index>`, or a
    note saying why none is drawn (no records given, none observed, records that disagree with the row)."""
    el(body, "h2", "SPRT: log-likelihood ratio after each trial")
    if not records and any(row.trials for _, row, _ in rows):
        el(
            body,
            "p",
            "The trial records (the evidence beside the card) were not given to the report: no SPRT path is drawn.",
            id="sprt-no-evidence",
        )
        return
    outcomes: dict[str, list[Outcome]] = {}
    for record in records:
        outcomes.setdefault(record.property_id, []).append(record.outcome)
    for index, row, rule in rows:
        path = sprt_path(rule, outcomes.get(row.id, ()))
        if path.trials == 0 and row.trials == 0:
            _note(body, index, row, f"{row.id}: no trial was observed, no path to draw.")
        elif (path.hits, path.trials) != (row.hits, row.trials):
            # Only a path that ends where the row stands may stand beside it: the page would contradict itself.
            text = (
                f"{row.id}: the records hold {path.hits}/{path.trials} hits but the row says "
                f"{row.hits}/{row.trials}: no path drawn."
            )
            _note(body, index, row, text)
        else:
            _plot(body, index, row, path)


def _note(body: ET.Element, index: int, row: PropertyRow, text: str) -> None:
    el(body, "p", html_text(text, 400), id=f"sprt-{index}", **{"class": "sprt-note"}, data_property=row.id)


def _plot(body: ET.Element, index: int, row: PropertyRow, path: SprtPath) -> None:
    sprt_plot(body, f"sprt-{index}", row.id, path, kind=str(row.kind))
    el(body, "p", _caption(row, path), **{"class": "sprt-caption"}, data_property=row.id)


def sprt_plot(body: ET.Element, slug: str, property_id: str, path: SprtPath, *, kind: str | None = None) -> None:
    """`path` (at least one trial) as `svg#<slug>`: a polyline, one point per trial, between the reject (A)
    and accept (B) lines; `kind`, the row's verdict kind when there is one (a live run has none yet)."""
    rule = path.rule
    data = {"kind": kind} if kind is not None else {}
    data |= {"trials": str(path.trials), "hits": str(path.hits), "gaps": str(path.gaps)}
    data |= {"final_llr": num(path.final), "upper": num(rule.upper), "lower": num(rule.lower)}
    data["decision"] = path.decision
    title = "log-likelihood ratio after each trial against A and B"
    llr_plot(body, slug, property_id, path.points, (rule.lower, rule.upper), step="trial", title=title, data=data)


def sprt_caption(property_id: str, path: SprtPath, *, live: bool = False) -> str:
    """What the path says: hits of trials, the rule, the llr after the last trial and where it stands;
    `live`: the run is still judging, so its last llr is the latest, not the final one."""
    rule = path.rule
    words = {
        "pass": "at or below B: the band holds",
        "below": "at or above A: the rate is below the band",
        "undecided": "between B and A at max_trials: undecided, not passed",
        "open": "between B and A: undecided before max_trials",
    }
    llr = "llr so far" if live else "final llr"
    return (
        f"{html_text(property_id, LABEL_CHARS)}: {path.hits}/{path.trials} hits (p0 {rule.p0}, p1 {rule.p1}), "
        f"{llr} {path.final:.3f}, {words[path.decision]}. The run checks the test only after each wave "
        f"of {rule.wave} trials and at max_trials {rule.max_trials}, so the path may cross a line between checks."
    )


def _caption(row: PropertyRow, path: SprtPath) -> str:
    text = sprt_caption(row.id, path)
    if path.gaps:
        text += (
            f" {path.gaps} timeout/fault trial(s) are drawn as trials without a hit, as the row counts them; "
            f"the fold decides such a row by them, not by the SPRT (kind {row.kind})."
        )
    return text
