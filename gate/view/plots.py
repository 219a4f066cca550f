"""The view's own SVG plots, drawn through the report's escaping markup (`gate.core.report.html_dom`):
two runs' hit-rate intervals side by side, one property's hit rate across runs, and a live run's SPRT or
paired path (the report's own plots, `gate.core.report.html_sprt` and `html_paired`). Every id and value
a card or a run holds reaches the markup only as an escaped attribute or text."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from gate.core.card.card import PropertyRow
from gate.core.report.html import row_interval
from gate.core.report.html_dom import el, fragment, html_text, line, num, svg
from gate.core.report.html_paired import PairedPath, paired_caption, paired_plot
from gate.core.report.html_sprt import SprtPath, sprt_caption, sprt_plot
from gate.view.history import PropertyPoint

_WIDTH = 620
_X0, _X1 = 200, 600  # the rate axis; property ids are drawn left of it
_ROW_H = 30
_TOP = 20
_LABEL_CHARS = 28


def _x(rate: float) -> float:
    return _X0 + max(0.0, min(1.0, rate)) * (_X1 - _X0)


def _side(group: ET.Element, row: PropertyRow, side: str, y: float) -> None:
    interval = row_interval(row)
    line(group, f"interval side-{side}", _x(interval.low), y, _x(interval.high), y)
    if row.trials > 0:
        el(group, "circle", **{"class": f"rate side-{side}"}, cx=num(_x(row.hits / row.trials)), cy=num(y), r="4")


def compare_plot(pairs: Sequence[tuple[str, PropertyRow | None, PropertyRow | None]]) -> Markup:
    """Per property both cards hold: run A's interval and rate above run B's, on one axis."""
    image = svg(el(None, "div"), "compare-rates", _WIDTH, _TOP + len(pairs) * _ROW_H + 4, "hit rates, A above B")
    for tick in (0.0, 0.5, 1.0):
        el(image, "text", num(tick), **{"class": "tick"}, x=num(_x(tick) - 6), y="12")
    for slot, (pid, a, b) in enumerate(pairs):
        y = _TOP + slot * _ROW_H + _ROW_H / 2
        attrs = {"class": "compare-row", "data-property": pid}
        for side, row in (("a", a), ("b", b)):
            if row is not None and row.trials > 0:
                attrs[f"data-rate-{side}"] = num(row.hits / row.trials)
        group = el(image, "g", **attrs)
        el(group, "text", html_text(pid, _LABEL_CHARS), **{"class": "label"}, x="4", y=num(y + 4))
        line(group, "axis", _x(0.0), y, _x(1.0), y)
        if a is not None:
            _side(group, a, "a", y - 5)
        if b is not None:
            _side(group, b, "b", y + 5)
    return Markup(fragment(image))


def history_plot(points: Sequence[PropertyPoint]) -> Markup:
    """The property's hit rate per run, oldest left: a dot per run on its interval, coloured by kind;
    a colour change ringed; a run that did not vote hollow."""
    height, top, bottom = 220, 14, 196
    step = max(8.0, min(40.0, (_X1 - 40) / max(1, len(points))))
    width = 40 + step * len(points) + 20
    image = svg(el(None, "div"), "history", width, height, "hit rate per run with its interval")

    def y(rate: float) -> float:
        return bottom - max(0.0, min(1.0, rate)) * (bottom - top)

    for tick in (0.0, 0.5, 1.0):
        el(image, "text", num(tick), **{"class": "tick"}, x="4", y=num(y(tick) + 4))
        line(image, "grid", 34, y(tick), width - 10, y(tick))
    for slot, point in enumerate(points):
        x = 40 + step * slot + step / 2
        group = el(
            image,
            "g",
            **{"class": f"run kind-{point.kind}"},
            data_run=point.run.run_id,
            data_kind=point.kind,
            data_lower=num(point.low),
            data_upper=num(point.high),
            data_colour_change="true" if point.colour_change else "false",
        )
        line(group, "interval", x, y(point.low), x, y(point.high))
        if point.rate is not None:
            cls = "rate" + ("" if point.voting else " not-voting") + (" colour-change" if point.colour_change else "")
            dot = el(
                group, "circle", **{"class": cls}, cx=num(x), cy=num(y(point.rate)), r="4", data_rate=num(point.rate)
            )
            el(dot, "title", f"{point.run.run_id[:12]}: {point.kind}, {point.hits}/{point.trials}")
    return Markup(fragment(image))


def live_path(slot: int, property_id: str, path: SprtPath | PairedPath) -> ET.Element:
    """A live run's sequential path so far (an SPRT's or the paired test's), drawn as the card's page draws
    it, with its caption."""
    box = el(None, "div", **{"class": "live-path"}, id=f"live-path-{slot}", data_property=property_id)
    if isinstance(path, SprtPath):
        sprt_plot(box, f"sprt-{slot}", property_id, path)
        el(box, "p", sprt_caption(property_id, path, live=True), **{"class": "sprt-caption"}, data_property=property_id)
    else:
        paired_plot(box, f"paired-{slot}", property_id, path)
        caption = f"{html_text(property_id, _LABEL_CHARS)}: {paired_caption(path, live=True)}"
        el(box, "p", caption, **{"class": "paired-caption"}, data_property=property_id)
    return box


def as_tree(element: ET.Element) -> list[Any]:
    """`element` as data, [tag, attributes, text, children], for the live page's script to build with DOM
    calls: a stream carries no markup for a page to parse."""
    return [element.tag, dict(element.attrib), element.text or "", [as_tree(child) for child in element]]
