"""The markup layer of the HTML report (`gate.core.report.html`, `gate.core.report.html_sprt`): one way to
make an element and one way to write a page, so no string of the card or its records is ever pasted
into markup.

Elements are built as an ElementTree whose tag and attribute names are the report modules' constants;
`el` passes every attribute value and text through `html_text` (one printable line), and `write_page`
escapes each of them again with `html.escape` (quotes too). The only text left as it is, is this
module's own style sheet.
"""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET

from gate.core.escaping import escaped

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
td.num { text-align: right; }
td.detail { font-family: monospace; white-space: pre-wrap; word-break: break-all; max-width: 50em; }
svg { display: block; }
svg text { font-size: 11px; font-family: sans-serif; }
.axis { stroke: #888; stroke-width: 1; }
.interval { stroke: #1f5fbf; stroke-width: 4; }
.rate { fill: #1f5fbf; }
.threshold, .p0, .base-rate { stroke: #c0392b; stroke-width: 1.5; }
.p1 { stroke: #e08e0b; stroke-width: 1.5; stroke-dasharray: 3 2; }
.deadline { stroke: #c0392b; stroke-width: 1.5; }
.duration { fill: #2e8b57; }
.duration.over { fill: #c0392b; }
.boundary.accept { stroke: #2e8b57; stroke-width: 1.5; stroke-dasharray: 4 3; }
.boundary.reject { stroke: #c0392b; stroke-width: 1.5; stroke-dasharray: 4 3; }
.llr { fill: none; stroke: #1f5fbf; stroke-width: 1.5; }
.llr-end { fill: #1f5fbf; }
details.trials { margin: 0.5em 0; }
details.trials .line { font-family: monospace; white-space: pre-wrap; word-break: break-all; }
"""

_VOID = frozenset({"meta"})  # HTML elements without an end tag, of those the report emits


def html_text(text: str, limit: int | None = None) -> str:
    """`text` as one line of inert text: every character that is not printable (newlines, NUL, ESC of
    an ANSI sequence, bidi marks, lone surrogates) as a visible \\n / \\xNN / \\uNNNN escape. Markup
    characters stay as they are: the serialiser escapes them."""
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return "".join(char if char.isprintable() else escaped(char) for char in text)


def el(parent: ET.Element | None, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    """An element whose attributes and text have passed `html_text` (the one way in); `data_x` and
    `http_equiv` keyword names become `data-x` and `http-equiv`."""
    clean = {key.replace("_", "-"): html_text(value) for key, value in attrs.items()}
    element = ET.Element(tag, clean) if parent is None else ET.SubElement(parent, tag, clean)
    if text is not None:
        element.text = html_text(text)
    return element


def num(value: float) -> str:
    """A coordinate or a statistic as an attribute value: six significant digits."""
    return f"{value:.6g}"


def svg(parent: ET.Element, element_id: str, width: float, height: float, label: str) -> ET.Element:
    """An inline SVG of `width` x `height` user units, described for assistive technology by `label`."""
    return el(
        parent,
        "svg",
        id=element_id,
        width=num(width),
        height=num(height),
        viewBox=f"0 0 {num(width)} {num(height)}",
        role="img",
        aria_label=label,
    )


def line(parent: ET.Element, cls: str, x1: float, y1: float, x2: float, y2: float, **attrs: str) -> ET.Element:
    """A `<line>` of class `cls` from (x1, y1) to (x2, y2)."""
    return el(parent, "line", **{"class": cls}, x1=num(x1), y1=num(y1), x2=num(x2), y2=num(y2), **attrs)


def style(head: ET.Element) -> None:
    """The page's style sheet, this module's constant: the only text `write_page` leaves unescaped."""
    ET.SubElement(head, "style").text = STYLE


def write_page(root: ET.Element) -> str:
    """The page as HTML text: a doctype, then `root`, ending in a newline."""
    out = ["<!DOCTYPE html>\n"]
    _write(root, out)
    return "".join(out) + "\n"


def fragment(element: ET.Element) -> str:
    """`element` as HTML markup to place inside another page, escaped as `write_page` escapes it."""
    out: list[str] = []
    _write(element, out)
    return "".join(out)


def _write(element: ET.Element, out: list[str]) -> None:
    """`element` as HTML: every attribute value and text escaped (`&`, `<`, `>`, both quotes), save the
    module's own style sheet; SVG children get explicit end tags, which HTML's foreign content accepts."""
    attrs = "".join(f' {name}="{html.escape(value, quote=True)}"' for name, value in element.attrib.items())
    out.append(f"<{element.tag}{attrs}>")
    if element.tag not in _VOID:
        if element.text:
            out.append(STYLE if element.text is STYLE else html.escape(element.text, quote=True))
        for child in element:
            _write(child, out)
        out.append(f"</{element.tag}>")
    if element.tail:
        out.append(html.escape(element.tail, quote=True))
