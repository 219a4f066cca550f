"""The HTML report's "trials to look at": the reviewers' view of the evidence (gate.core.report.evidence_view)
drawn into the page, one collapsible block per property: what missed, timed out or faulted, and a
sample of passing trials, each naming its record (`evidence/<digest>.json`).

Pure. The view's text lines already hold every record value escaped onto one line after a fixed
label; here each line becomes one element's text, which `gate.core.report.html_dom` escapes for HTML too.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord
from gate.core.report.evidence_view import build_review, by_digest
from gate.core.report.html_dom import el

_LINE_CHARS = 2000  # a line of the view; the record keeps everything


def draw_trials(body: ET.Element, card: VerdictCard, records: Sequence[TrialRecord]) -> None:
    """A `section#trials`: per property a `details.trials[data-property, data-problems, data-passes]`
    (open when anything missed, timed out or faulted), or a note that no records were given."""
    section = el(body, "section", id="trials")
    el(section, "h2", "Trials to look at")
    if not records:
        el(section, "p", "The trial records were not given, so no trial is shown.", **{"class": "no-records"})
        return
    review = build_review(card, by_digest(records))
    el(
        section,
        "p",
        f"Every missed, timed-out or faulted trial (up to {review.limit} per property) and a sample of "
        f"{review.passes} passing ones; each names its record in the evidence store.",
    )
    for view in review.properties:
        problems = len(view.problems) + view.more
        block = el(
            section,
            "details",
            **{"class": "trials", "data-property": view.property_id, "data-problems": str(problems)},
            data_passes=str(len(view.passes)),
            data_side=str(view.side),  # a paired row's base-tree trials have a block of their own
        )
        if problems:
            block.set("open", "open")
        el(block, "summary", view.count_line())
        for text in view.lines()[1:]:  # the first is the count line, already the summary
            el(block, "div", text[:_LINE_CHARS], **{"class": "line"})
    if review.unbound:
        # A hand-edited card can rename a row away from its records; say so rather than hide them.
        unbound = ", ".join(review.unbound)
        el(section, "p", f"Records for properties the card has no row for: {unbound}", **{"class": "unbound"})
