"""The verdict card as one self-contained HTML page: the job's status first, a table of the
properties, inline SVG plots (hit rate with its Wilson interval against the band, or against the base's
rate for a paired row; the SPRT's and the paired test's log-likelihood ratio paths, from the trial
records; trial durations against the deadline) and the freezes and ledger actions.

Pure: card and records in, text out. Ids, details and reasons quote the patch's output, so the page
is built only through `gate.core.report.html_dom`, which escapes every text and attribute value: no string
of the card or its records is ever pasted into markup. The page carries a strict
Content-Security-Policy and no script; the SVG elements carry stable ids, classes and `data-`
attributes so a browser test can read what is drawn.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from pydantic import TypeAdapter, ValidationError

from gate.core.card.card import PropertyRow, VerdictCard
from gate.core.card.evidence import TrialRecord
from gate.core.policy.flakes import files_line, flake_note
from gate.core.policy.words import flake_line
from gate.core.report.html_dom import CSP, el, html_text, line, num, style, svg, write_page
from gate.core.report.html_paired import draw_paired_paths
from gate.core.report.html_sprt import draw_sprt_paths
from gate.core.report.html_trials import draw_trials
from gate.core.trust.crosscheck_summary import report_lines
from gate.core.verdicts.bands import FixedRule, Interval, SprtRule, wilson
from gate.core.verdicts.paired import AnyRule, PairedRule
from gate.core.verdicts.verdict import Band

_CELL_CHARS = 2000  # the card keeps the whole detail; the page needs a readable row
_LABEL_CHARS = 24  # a property id beside its plot row
_RULE: TypeAdapter[AnyRule] = TypeAdapter(AnyRule)

# Plot geometry, in SVG user units.
_WIDTH = 520
_PLOT_X0 = 180  # left of the axis; the property id is drawn before it
_PLOT_X1 = 500
_ROW_H = 26
_TOP = 22  # room for the axis labels


def _x(rate: float) -> float:
    return _PLOT_X0 + max(0.0, min(1.0, rate)) * (_PLOT_X1 - _PLOT_X0)


def _rule(row: PropertyRow) -> FixedRule | SprtRule | PairedRule | None:
    """The row's band rule, or None when it has none (or one this gate cannot read)."""
    if row.rule is None:
        return None
    try:
        return _RULE.validate_python(row.rule)
    except ValidationError:
        return None


def row_interval(row: PropertyRow) -> Interval:
    """The row's interval as the card gives it, else Wilson's over its hits (the whole axis when it cannot hold)."""
    if row.interval is not None:
        return row.interval
    return wilson(row.hits, row.trials) if 0 <= row.hits <= row.trials else Interval(low=0.0, high=1.0)


def _svg(parent: ET.Element, element_id: str, rows: int, label: str) -> ET.Element:
    return svg(parent, element_id, _WIDTH, _TOP + rows * _ROW_H + 4, label)


def _label(parent: ET.Element, y: float, row: PropertyRow) -> None:
    el(parent, "text", html_text(row.id, _LABEL_CHARS), **{"class": "label"}, x="4", y=num(y + 4))


def _rate_plot(body: ET.Element, rows: list[tuple[int, PropertyRow]]) -> None:
    """Per statistical property: the hit rate, its Wilson interval and the band's threshold (a fixed
    rule's min_hits/trials; an SPRT's p0 and p1)."""
    el(body, "h2", "Hit rates against the band")
    image = _svg(body, "rates", len(rows), "hit rate with its Wilson interval against the band threshold")
    for tick in (0.0, 0.5, 1.0):
        el(image, "text", num(tick), **{"class": "tick"}, x=num(_x(tick) - 6), y="12")
    for slot, (index, row) in enumerate(rows):
        y = _TOP + slot * _ROW_H + _ROW_H / 2
        interval = row_interval(row)
        attrs = {
            "id": f"rate-{index}",
            "class": "rate-row",
            "data-property": row.id,
            "data-trials": str(row.trials),
            "data-hits": str(row.hits),
            "data-lower": num(interval.low),
            "data-upper": num(interval.high),
            "data-kind": str(row.kind),
        }
        if row.trials > 0:
            attrs["data-rate"] = num(row.hits / row.trials)
        rule = _rule(row)
        if isinstance(rule, FixedRule):
            attrs.update({"data-rule": "fixed", "data-threshold": num(rule.min_hits / rule.trials)})
        elif isinstance(rule, SprtRule):
            attrs.update({"data-rule": "sprt", "data-p0": num(rule.p0), "data-p1": num(rule.p1)})
        base = row.paired.base if isinstance(rule, PairedRule) and row.paired is not None else None
        if isinstance(rule, PairedRule):
            attrs.update({"data-rule": "paired", "data-margin": num(rule.margin)})
            if base is not None and base.trials:
                attrs["data-base-rate"] = num(base.hit / base.trials)
        group = el(image, "g", **attrs)
        _label(group, y, row)
        line(group, "axis", _x(0.0), y, _x(1.0), y)
        line(group, "interval", _x(interval.low), y, _x(interval.high), y)
        if isinstance(rule, FixedRule):
            tx = _x(rule.min_hits / rule.trials)
            line(group, "threshold", tx, y - 9, tx, y + 9)
        elif isinstance(rule, SprtRule):
            line(group, "p0", _x(rule.p0), y - 9, _x(rule.p0), y + 9)
            line(group, "p1", _x(rule.p1), y - 9, _x(rule.p1), y + 9)
        elif base is not None and base.trials:
            # The paired rule's band is the base's own rate, observed on the same indices.
            line(group, "base-rate", _x(base.hit / base.trials), y - 9, _x(base.hit / base.trials), y + 9)
        if row.trials > 0:
            el(group, "circle", **{"class": "rate"}, cx=num(_x(row.hits / row.trials)), cy=num(y), r="4")


def _duration_plot(body: ET.Element, rows: list[tuple[int, PropertyRow]]) -> None:
    """Per property: each trial's duration as a dot on a scale from 0 to the larger of the deadline and
    the slowest trial, and the deadline as a line; a trial past the deadline is class `over`."""
    el(body, "h2", "Trial durations against the deadline")
    image = _svg(body, "durations", len(rows), "trial durations against each property's deadline")
    for slot, (index, row) in enumerate(rows):
        y = _TOP + slot * _ROW_H + _ROW_H / 2
        finite = [s for s in (row.deadline_s, *row.durations_s) if math.isfinite(s) and s > 0]
        scale = max(finite, default=1.0) * 1.05
        group = el(
            image,
            "g",
            id=f"durations-{index}",
            **{"class": "duration-row"},
            data_property=row.id,
            data_deadline=num(row.deadline_s),
            data_scale=num(scale),
            data_trials=str(len(row.durations_s)),
        )
        _label(group, y, row)
        line(group, "axis", _x(0.0), y, _x(1.0), y)
        dx = _x(row.deadline_s / scale)
        line(group, "deadline", dx, y - 9, dx, y + 9, data_seconds=num(row.deadline_s))
        for seconds in row.durations_s:
            cls = "duration over" if seconds > row.deadline_s else "duration"
            el(
                group,
                "circle",
                **{"class": cls},
                cx=num(_x(seconds / scale)),
                cy=num(y),
                r="3",
                data_seconds=num(seconds),
            )


def _table(body: ET.Element, card: VerdictCard) -> None:
    table = el(body, "table", id="properties")
    head = el(el(table, "thead"), "tr")
    for name in ("property", "band", "kind", "trials", "hits", "detail"):
        el(head, "th", name)
    rows = el(table, "tbody")
    for index, row in enumerate(card.properties):
        kind = str(row.kind)
        if not row.voting:
            kind += f" (not voting: {row.frozen_by or (str(row.ledger) if row.ledger else 'no vote')})"
        tr = el(rows, "tr", id=f"property-{index}", data_property=row.id, data_kind=str(row.kind))
        el(tr, "td", row.id)
        el(tr, "td", str(row.band))
        el(tr, "td", kind)
        el(tr, "td", str(row.trials), **{"class": "num"})
        el(tr, "td", str(row.hits), **{"class": "num"})
        el(tr, "td", html_text(row.detail, _CELL_CHARS), **{"class": "detail"})


def _flakes(body: ET.Element, card: VerdictCard) -> None:
    """Rows that changed colour on identical bytes, their base reruns, the nightly pair's colour changes
    between its runs, and the flake files written."""
    changed = [row for row in card.properties if row.colour_change is not None]
    if not changed and not card.pair_flakes:
        return
    el(body, "h2", "Colour changes")
    items = el(body, "ul", id="flakes")
    for flake in card.pair_flakes:
        text = html_text(flake_line(flake, card.flake_causes), _CELL_CHARS)
        el(items, "li", text, **{"class": "pair-flake"}, data_property=flake.property_id)
    for row in changed:
        rerun = row.base_rerun
        el(
            items,
            "li",
            html_text(f"{row.id}: {flake_note(row.band, rerun)}", _CELL_CHARS),
            **{"class": "colour-change"},
            data_property=row.id,
            data_rerun=str(rerun.verdict) if rerun else "none",
        )
    if card.flake_files is not None:
        el(items, "li", html_text(files_line(card.flake_files), _CELL_CHARS), **{"class": "flake-files"})


def _lists(body: ET.Element, card: VerdictCard) -> None:
    """Freezes (active and inactive) and the ledger actions the run took."""
    el(body, "h2", "Freezes and ledger actions")
    freezes = el(body, "ul", id="freezes")
    for prop, by in sorted(card.freeze_set.items()):
        el(freezes, "li", f"{prop}: frozen by {by}", **{"class": "freeze"}, data_property=prop, data_active="true")
    for prop, why in sorted(card.freezes_inactive.items()):
        el(freezes, "li", f"{prop}: inactive ({why})", **{"class": "freeze"}, data_property=prop, data_active="false")
    for lift in card.lift_proposals:
        el(freezes, "li", html_text(lift.line(), _CELL_CHARS), **{"class": "lift"}, data_property=lift.property_id)
    if card.flake_history:
        el(freezes, "li", html_text(f"flake history: {card.flake_history}", _CELL_CHARS), **{"class": "flake-history"})
    shown = card.pair_flakes or any(row.colour_change for row in card.properties)  # in "Colour changes"
    if card.flake_files is not None and not shown:
        el(freezes, "li", html_text(files_line(card.flake_files), _CELL_CHARS), **{"class": "flake-files"})
    if not card.freeze_set and not card.freezes_inactive:
        el(freezes, "li", "no freezes", **{"class": "none"})
    ledger = el(body, "ul", id="ledger")
    for entry in card.ledger_actions:
        text = f"{entry.property_id}: {entry.action}, {entry.remaining} left until {entry.expires_at.isoformat()}"
        if entry.detail:
            text += f" ({html_text(entry.detail, _CELL_CHARS)})"
        el(
            ledger,
            "li",
            text,
            **{"class": "ledger-action"},
            data_property=entry.property_id,
            data_action=str(entry.action),
            data_remaining=str(entry.remaining),
        )
    if not card.ledger_actions:
        el(ledger, "li", "no ledger actions", **{"class": "none"})


def render_html(card: VerdictCard, records: Sequence[TrialRecord] = ()) -> str:
    """The page as HTML text (a doctype, then one `<html>`), ending in a newline; the SPRT paths are
    drawn from `records` (the card's trial records), and without them the page says they were not given."""
    root = el(None, "html", lang="en")
    head = el(root, "head")
    el(head, "meta", http_equiv="Content-Security-Policy", content=CSP)
    el(head, "meta", charset="utf-8")
    el(head, "title", f"probegate: job {card.status} — {card.suite}")
    style(head)
    draw_report(el(root, "body"), card, records)
    return write_page(root)


def draw_report(body: ET.Element, card: VerdictCard, records: Sequence[TrialRecord] = ()) -> None:
    """The page's content under `body`: what `render_html` shows, and `gate view` shows of a finished run."""
    el(
        body,
        "h1",
        f"probegate: job {card.status} (exit {card.exit_code})",
        id="status",
        data_status=str(card.status),
        data_exit_code=str(card.exit_code),
    )
    el(body, "p", f"Suite {card.suite}, run {card.run_id[:12]}, gate {card.gate_version}.", id="run")
    if card.reasons:
        reasons = el(body, "ul", id="reasons")
        for reason in card.reasons:
            el(reasons, "li", html_text(reason, _CELL_CHARS), **{"class": "reason"})
    _table(body, card)
    numbered = list(enumerate(card.properties))
    statistical = [(i, row) for i, row in numbered if row.band is Band.STATISTICAL or row.rule is not None]
    if statistical:
        _rate_plot(body, statistical)
    sprt = [
        (i, row, rule)
        for i, row in numbered
        if row.band is Band.STATISTICAL and isinstance(rule := _rule(row), SprtRule)
    ]
    if sprt:
        draw_sprt_paths(body, sprt, records)
    paired = [
        (i, row, rule)
        for i, row in numbered
        if row.band is Band.STATISTICAL and isinstance(rule := _rule(row), PairedRule)
    ]
    if paired:
        draw_paired_paths(body, paired, records)
    if numbered:
        _duration_plot(body, numbered)
    draw_trials(body, card, records)
    _flakes(body, card)
    if workers := report_lines(card.cross_check, (row.workers for row in card.properties)):
        el(body, "h2", "Workers and cross-checks")
        items = el(body, "ul", id="cross-check")
        for line in workers:
            el(items, "li", html_text(line, _CELL_CHARS), **{"class": "cross-check"})
    _lists(body, card)
    image = card.image_id.removeprefix("sha256:")[:12] or "-"
    el(body, "p", f"Image {image}, seal {card.fixture.seal[:16]}.", id="digests")
