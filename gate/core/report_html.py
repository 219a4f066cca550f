"""The verdict card as one self-contained HTML page: the job's status first, a table of the
properties, inline SVG plots (hit rate with its Wilson interval against the band; trial durations
against the deadline) and the freezes and ledger actions.

Pure: card in, text out. Ids, details and reasons quote the patch's output, so the page is built
as an ElementTree (tag and attribute names are this module's constants) and serialised by `_write`,
which passes every text and attribute value through `html.escape` (quotes too) after `html_text`
made it one printable line: no string of the card is ever pasted into markup. The page carries a strict
Content-Security-Policy and no script; the SVG elements carry stable ids, classes and `data-`
attributes so a browser test can read what is drawn.
"""

from __future__ import annotations

import html
import math
import xml.etree.ElementTree as ET

from pydantic import TypeAdapter, ValidationError

from gate.core.bands import BandRule, FixedRule, Interval, SprtRule, wilson
from gate.core.card import PropertyRow, VerdictCard
from gate.core.errors import escaped
from gate.core.verdict import Band

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_CELL_CHARS = 2000  # the card keeps the whole detail; the page needs a readable row
_LABEL_CHARS = 24  # a property id beside its plot row
_RULE = TypeAdapter(BandRule)

# Plot geometry, in SVG user units.
_WIDTH = 520
_PLOT_X0 = 180  # left of the axis; the property id is drawn before it
_PLOT_X1 = 500
_ROW_H = 26
_TOP = 22  # room for the axis labels

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
td.num { text-align: right; }
td.detail { font-family: monospace; white-space: pre-wrap; word-break: break-all; max-width: 50em; }
svg text { font-size: 11px; font-family: sans-serif; }
.axis { stroke: #888; stroke-width: 1; }
.interval { stroke: #1f5fbf; stroke-width: 4; }
.rate { fill: #1f5fbf; }
.threshold, .p0 { stroke: #c0392b; stroke-width: 1.5; }
.p1 { stroke: #e08e0b; stroke-width: 1.5; stroke-dasharray: 3 2; }
.deadline { stroke: #c0392b; stroke-width: 1.5; }
.duration { fill: #2e8b57; }
.duration.over { fill: #c0392b; }
"""


def html_text(text: str, limit: int | None = None) -> str:
    """`text` as one line of inert text: every character that is not printable (newlines, NUL, ESC of
    an ANSI sequence, bidi marks, lone surrogates) as a visible \\n / \\xNN / \\uNNNN escape. Markup
    characters stay as they are: the serialiser escapes them."""
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return "".join(char if char.isprintable() else escaped(char) for char in text)


def _el(parent: ET.Element | None, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    """An element whose attributes and text have passed `html_text` (the one way in); `data_x` and
    `http_equiv` keyword names become `data-x` and `http-equiv`."""
    clean = {key.replace("_", "-"): html_text(value) for key, value in attrs.items()}
    element = ET.Element(tag, clean) if parent is None else ET.SubElement(parent, tag, clean)
    if text is not None:
        element.text = html_text(text)
    return element


def _num(value: float) -> str:
    return f"{value:.6g}"


def _x(rate: float) -> float:
    return _PLOT_X0 + max(0.0, min(1.0, rate)) * (_PLOT_X1 - _PLOT_X0)


def _rule(row: PropertyRow) -> FixedRule | SprtRule | None:
    """The row's band rule, or None when it has none (or one this gate cannot read)."""
    if row.rule is None:
        return None
    try:
        return _RULE.validate_python(row.rule)
    except ValidationError:
        return None


def _interval(row: PropertyRow) -> Interval:
    if row.interval is not None:
        return row.interval
    return wilson(row.hits, row.trials) if 0 <= row.hits <= row.trials else Interval(low=0.0, high=1.0)


def _svg(parent: ET.Element, element_id: str, rows: int, label: str) -> ET.Element:
    height = _TOP + rows * _ROW_H + 4
    return _el(
        parent,
        "svg",
        id=element_id,
        width=str(_WIDTH),
        height=str(height),
        viewBox=f"0 0 {_WIDTH} {height}",
        role="img",
        aria_label=label,
    )


def _line(parent: ET.Element, cls: str, x1: float, y1: float, x2: float, y2: float, **attrs: str) -> ET.Element:
    return _el(parent, "line", **{"class": cls}, x1=_num(x1), y1=_num(y1), x2=_num(x2), y2=_num(y2), **attrs)


def _label(parent: ET.Element, y: float, row: PropertyRow) -> None:
    _el(parent, "text", html_text(row.id, _LABEL_CHARS), **{"class": "label"}, x="4", y=_num(y + 4))


def _rate_plot(body: ET.Element, rows: list[tuple[int, PropertyRow]]) -> None:
    """Per statistical property: the hit rate, its Wilson interval and the band's threshold (a fixed
    rule's min_hits/trials; an SPRT's p0 and p1)."""
    _el(body, "h2", "Hit rates against the band")
    svg = _svg(body, "rates", len(rows), "hit rate with its Wilson interval against the band threshold")
    for tick in (0.0, 0.5, 1.0):
        _el(svg, "text", _num(tick), **{"class": "tick"}, x=_num(_x(tick) - 6), y="12")
    for slot, (index, row) in enumerate(rows):
        y = _TOP + slot * _ROW_H + _ROW_H / 2
        interval = _interval(row)
        attrs = {
            "id": f"rate-{index}",
            "class": "rate-row",
            "data-property": row.id,
            "data-trials": str(row.trials),
            "data-hits": str(row.hits),
            "data-lower": _num(interval.low),
            "data-upper": _num(interval.high),
            "data-kind": str(row.kind),
        }
        if row.trials > 0:
            attrs["data-rate"] = _num(row.hits / row.trials)
        rule = _rule(row)
        if isinstance(rule, FixedRule):
            attrs.update({"data-rule": "fixed", "data-threshold": _num(rule.min_hits / rule.trials)})
        elif isinstance(rule, SprtRule):
            attrs.update({"data-rule": "sprt", "data-p0": _num(rule.p0), "data-p1": _num(rule.p1)})
        group = _el(svg, "g", **attrs)
        _label(group, y, row)
        _line(group, "axis", _x(0.0), y, _x(1.0), y)
        _line(group, "interval", _x(interval.low), y, _x(interval.high), y)
        if isinstance(rule, FixedRule):
            tx = _x(rule.min_hits / rule.trials)
            _line(group, "threshold", tx, y - 9, tx, y + 9)
        elif isinstance(rule, SprtRule):
            _line(group, "p0", _x(rule.p0), y - 9, _x(rule.p0), y + 9)
            _line(group, "p1", _x(rule.p1), y - 9, _x(rule.p1), y + 9)
        if row.trials > 0:
            _el(group, "circle", **{"class": "rate"}, cx=_num(_x(row.hits / row.trials)), cy=_num(y), r="4")


def _duration_plot(body: ET.Element, rows: list[tuple[int, PropertyRow]]) -> None:
    """Per property: each trial's duration as a dot on a scale from 0 to the larger of the deadline and
    the slowest trial, and the deadline as a line; a trial past the deadline is class `over`."""
    _el(body, "h2", "Trial durations against the deadline")
    svg = _svg(body, "durations", len(rows), "trial durations against each property's deadline")
    for slot, (index, row) in enumerate(rows):
        y = _TOP + slot * _ROW_H + _ROW_H / 2
        finite = [s for s in (row.deadline_s, *row.durations_s) if math.isfinite(s) and s > 0]
        scale = max(finite, default=1.0) * 1.05
        group = _el(
            svg,
            "g",
            id=f"durations-{index}",
            **{"class": "duration-row"},
            data_property=row.id,
            data_deadline=_num(row.deadline_s),
            data_scale=_num(scale),
            data_trials=str(len(row.durations_s)),
        )
        _label(group, y, row)
        _line(group, "axis", _x(0.0), y, _x(1.0), y)
        dx = _x(row.deadline_s / scale)
        _line(group, "deadline", dx, y - 9, dx, y + 9, data_seconds=_num(row.deadline_s))
        for seconds in row.durations_s:
            cls = "duration over" if seconds > row.deadline_s else "duration"
            _el(
                group,
                "circle",
                **{"class": cls},
                cx=_num(_x(seconds / scale)),
                cy=_num(y),
                r="3",
                data_seconds=_num(seconds),
            )


def _table(body: ET.Element, card: VerdictCard) -> None:
    table = _el(body, "table", id="properties")
    head = _el(_el(table, "thead"), "tr")
    for name in ("property", "band", "kind", "trials", "hits", "detail"):
        _el(head, "th", name)
    rows = _el(table, "tbody")
    for index, row in enumerate(card.properties):
        kind = str(row.kind)
        if not row.voting:
            kind += f" (not voting: {row.frozen_by or (str(row.ledger) if row.ledger else 'no vote')})"
        tr = _el(rows, "tr", id=f"property-{index}", data_property=row.id, data_kind=str(row.kind))
        _el(tr, "td", row.id)
        _el(tr, "td", str(row.band))
        _el(tr, "td", kind)
        _el(tr, "td", str(row.trials), **{"class": "num"})
        _el(tr, "td", str(row.hits), **{"class": "num"})
        _el(tr, "td", html_text(row.detail, _CELL_CHARS), **{"class": "detail"})


def _lists(body: ET.Element, card: VerdictCard) -> None:
    """Freezes (active and inactive) and the ledger actions the run took."""
    _el(body, "h2", "Freezes and ledger actions")
    freezes = _el(body, "ul", id="freezes")
    for prop, by in sorted(card.freeze_set.items()):
        _el(freezes, "li", f"{prop}: frozen by {by}", **{"class": "freeze"}, data_property=prop, data_active="true")
    for prop, why in sorted(card.freezes_inactive.items()):
        _el(freezes, "li", f"{prop}: inactive ({why})", **{"class": "freeze"}, data_property=prop, data_active="false")
    if not card.freeze_set and not card.freezes_inactive:
        _el(freezes, "li", "no freezes", **{"class": "none"})
    ledger = _el(body, "ul", id="ledger")
    for entry in card.ledger_actions:
        text = f"{entry.property_id}: {entry.action}, {entry.remaining} left until {entry.expires_at.isoformat()}"
        if entry.detail:
            text += f" ({html_text(entry.detail, _CELL_CHARS)})"
        _el(
            ledger,
            "li",
            text,
            **{"class": "ledger-action"},
            data_property=entry.property_id,
            data_action=str(entry.action),
            data_remaining=str(entry.remaining),
        )
    if not card.ledger_actions:
        _el(ledger, "li", "no ledger actions", **{"class": "none"})


def render_html(card: VerdictCard) -> str:
    """The page as HTML text (a doctype, then one `<html>`), ending in a newline."""
    root = _el(None, "html", lang="en")
    head = _el(root, "head")
    _el(head, "meta", http_equiv="Content-Security-Policy", content=CSP)
    _el(head, "meta", charset="utf-8")
    _el(head, "title", f"probegate: job {card.status} — {card.suite}")
    style = ET.SubElement(head, "style")
    style.text = _STYLE  # a constant of this module: the only text `_write` leaves unescaped
    body = _el(root, "body")
    _el(
        body,
        "h1",
        f"probegate: job {card.status} (exit {card.exit_code})",
        id="status",
        data_status=str(card.status),
        data_exit_code=str(card.exit_code),
    )
    _el(body, "p", f"Suite {card.suite}, run {card.run_id[:12]}, gate {card.gate_version}.", id="run")
    if card.reasons:
        reasons = _el(body, "ul", id="reasons")
        for reason in card.reasons:
            _el(reasons, "li", html_text(reason, _CELL_CHARS), **{"class": "reason"})
    _table(body, card)
    numbered = list(enumerate(card.properties))
    statistical = [(i, row) for i, row in numbered if row.band is Band.STATISTICAL or row.rule is not None]
    if statistical:
        _rate_plot(body, statistical)
    if numbered:
        _duration_plot(body, numbered)
    _lists(body, card)
    image = card.image_id.removeprefix("sha256:")[:12] or "-"
    _el(body, "p", f"Image {image}, seal {card.fixture.seal[:16]}.", id="digests")
    out = ["<!DOCTYPE html>\n"]
    _write(root, out)
    return "".join(out) + "\n"


_VOID = frozenset({"meta"})  # HTML elements without an end tag, of those this module emits


def _write(element: ET.Element, out: list[str]) -> None:
    """`element` as HTML: every attribute value and text escaped (`&`, `<`, `>`, both quotes), save the
    module's own style sheet; SVG children get explicit end tags, which HTML's foreign content accepts."""
    attrs = "".join(f' {name}="{html.escape(value, quote=True)}"' for name, value in element.attrib.items())
    out.append(f"<{element.tag}{attrs}>")
    if element.tag not in _VOID:
        if element.text:
            out.append(_STYLE if element.text is _STYLE else html.escape(element.text, quote=True))
        for child in element:
            _write(child, out)
        out.append(f"</{element.tag}>")
    if element.tail:
        out.append(html.escape(element.tail, quote=True))
