"""One sequential test's path for the HTML report: a log-likelihood ratio after each step (a trial under
SPRT, a pair under the paired rule) drawn as a polyline between Wald's two bounds, A above and B below.
`gate.core.report.html_sprt` and `gate.core.report.html_paired` choose the points and write the captions.
Pure: values in, elements out, built with `gate.core.report.html_dom`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from gate.core.report.html_dom import el, html_text, line, num, svg

LABEL_CHARS = 60  # a property id above its plot

# Plot geometry, in SVG user units.
_WIDTH = 520
_HEIGHT = 180
_X0 = 60  # left of the plot; the bound labels are drawn before it
_X1 = 500
_TOP = 26  # room for the property id
_BOTTOM = 150  # below: the step axis labels


def llr_plot(
    body: ET.Element,
    slug: str,
    property_id: str,
    points: Sequence[float],
    bounds: tuple[float, float],
    *,
    step: str,
    title: str,
    data: dict[str, str],
) -> None:
    """Draw `points` (one per `step`, at least one) between `bounds` (lower B, upper A) as an SVG `slug`,
    its group carrying the property's id and the caller's `data_*` attributes."""
    lower, upper = bounds
    low, high = min(lower, *points), max(upper, *points)
    pad = (high - low) * 0.05
    low, high = low - pad, high + pad
    steps = len(points)

    def x(k: int) -> float:
        return _X0 + k / steps * (_X1 - _X0)

    def y(llr: float) -> float:
        return _BOTTOM - (llr - low) / (high - low) * (_BOTTOM - _TOP)

    image = svg(body, slug, _WIDTH, _HEIGHT, title)
    extra = {f"data_{key}": value for key, value in data.items()}
    group = el(image, "g", **{"class": f"{slug.rsplit('-', 1)[0]}-path"}, data_property=property_id, **extra)
    el(group, "text", html_text(property_id, LABEL_CHARS), **{"class": "label"}, x="4", y="14")
    line(group, "axis", _X0, y(0.0), _X1, y(0.0), data_llr="0")
    line(group, "axis", _X0, _TOP, _X0, _BOTTOM)
    line(group, "boundary reject", _X0, y(upper), _X1, y(upper), data_llr=num(upper))
    line(group, "boundary accept", _X0, y(lower), _X1, y(lower), data_llr=num(lower))
    el(group, "text", f"A {upper:.2f}", **{"class": "tick"}, x="4", y=num(y(upper) + 4))
    el(group, "text", f"B {lower:.2f}", **{"class": "tick"}, x="4", y=num(y(lower) + 4))
    el(group, "text", f"{step} 1", **{"class": "tick"}, x=num(x(1) - 8), y=num(_BOTTOM + 16))
    el(group, "text", str(steps), **{"class": "tick"}, x=num(_X1 - 8), y=num(_BOTTOM + 16))
    polyline = " ".join(f"{num(x(k))},{num(y(llr))}" for k, llr in enumerate(points, start=1))
    el(group, "polyline", **{"class": "llr"}, points=polyline)
    el(group, "circle", **{"class": "llr-end"}, cx=num(x(steps)), cy=num(y(points[-1])), r="3")
