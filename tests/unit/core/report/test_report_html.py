"""The HTML report of a verdict card (gate.core.report.html) and its wiring: `gate run --report-html`
and `gate report CARD --report-html`; no Docker."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from support.html_page import Page
from support.mini_suite import NOW, build_suite, good, run, run_request

from gate.cli.main import main
from gate.core.card.card import PropertyRow, VerdictCard
from gate.core.card.evidence import TrialRecord, record_digest
from gate.core.errors import RET_OK, RET_USAGE, UsageError
from gate.core.policy.ledger import LedgerAction, LedgerEntry
from gate.core.report.html import CSP, render_html
from gate.core.suite.trial import Captured, Observation
from gate.core.verdicts.bands import wilson
from gate.core.verdicts.verdict import Band, Kind, Outcome, OutcomeKind
from gate.io.artifacts import read_card
from gate.io.evidence import verified_records
from gate.io.reports import ReportTargets

# Each of the strings a patch could print to break out of the page, run a script or hide in it.
HOSTILE_PARTS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</svg><svg onload=alert(1)>",
    "\x1b[31mred\x1b[0m",
    "nul\x00byte",
    "lone\ud800surrogate",
    "</td></tr></table><style>*{}</style><a href=javascript:alert(1)>x</a>&amp;",
    "' onmouseover='alert(1)",
]
HOSTILE = " ".join(HOSTILE_PARTS)

# Every element the renderer emits: anything else in a page was smuggled in by a string of the card.
EMITTED = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "ul", "li", "table", "thead",
    "tbody", "tr", "th", "td", "svg", "g", "text", "line", "circle", "polyline", "section", "details",
    "summary", "div",
}  # fmt: skip


def stat_row(card: VerdictCard, **update: object) -> PropertyRow:
    base = next(row for row in card.properties if row.band is Band.STATISTICAL)
    return base.model_copy(update=update)


def fixed_row(card: VerdictCard, name: str = "rate_fixed") -> PropertyRow:
    return stat_row(
        card,
        id=name,
        hits=7,
        trials=10,
        interval=wilson(7, 10),
        rule={"rule": "fixed", "trials": 10, "min_hits": 8},
        kind=Kind.INCONCLUSIVE_SAMPLE,
    )


def sprt_row(card: VerdictCard, name: str = "rate_sprt") -> PropertyRow:
    return stat_row(
        card,
        id=name,
        hits=18,
        trials=20,
        interval=wilson(18, 20),
        rule={"rule": "sprt", "p0": 0.9, "p1": 0.6, "alpha": 0.05, "beta": 0.05, "max_trials": 60, "wave": 5},
    )


def hostile_card(card: VerdictCard, text: str) -> VerdictCard:
    """`text` in every string of the card a patch's output (or a hand-edited card) can reach."""
    rows = [row.model_copy(update={"id": f"{row.id}{text}", "detail": text}) for row in card.properties]
    rows.append(fixed_row(card, f"fixed{text}").model_copy(update={"detail": text}))
    entry = LedgerEntry(property_id=f"p{text}", action=LedgerAction.OPENED, remaining=1, expires_at=NOW, detail=text)
    return card.model_copy(
        update={
            "properties": tuple(rows),
            "reasons": (text, f"second {text}"),
            "suite": f"gate{text}.toml",
            "run_id": text,
            "gate_version": text,
            "freeze_set": {f"f{text}": text},
            "freezes_inactive": {f"i{text}": text},
            "ledger_actions": (entry,),
        }
    )


def hostile_records(card: VerdictCard, text: str) -> list[TrialRecord]:
    """For every row of `card`, one missed trial whose check message and stdout are `text` and one hit."""
    data = text.encode("utf-8", "surrogatepass")
    return [
        TrialRecord(
            property_id=row.id,
            trial_index=index,
            observation=Observation(
                run_id="r", property_id=row.id, trial_index=index, stdout=Captured(data=data, length=len(data))
            ),
            outcome=Outcome(trial_index=index, kind=kind, detail=text if kind is OutcomeKind.MISS else ""),
        )
        for row in card.properties
        for index, kind in enumerate((OutcomeKind.MISS, OutcomeKind.HIT))
    ]


# --- the page ----------------------------------------------------------------------------------------


def test_html_has_the_csp_first_and_the_job_status_before_anything_else(card: VerdictCard) -> None:
    """The CSP meta is the head's first element, exactly as specified, and the body opens with the status."""
    html = render_html(card)
    assert html.startswith("<!DOCTYPE html>\n")
    page = Page(html)
    tags = [tag for tag, _ in page.elements]
    assert tags[:3] == ["html", "head", "meta"]
    assert page.elements[2][1] == {"http-equiv": "Content-Security-Policy", "content": CSP}
    assert CSP == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert tags[tags.index("body") + 1] == "h1"
    assert page.by_id("status") == {
        "id": "status",
        "data-status": "accepted",
        "data-exit-code": "0",
    }
    assert "script" not in page.tags


def test_html_table_has_one_row_per_property_with_its_counts(card: VerdictCard) -> None:
    """The table lists id, band, kind, trials, hits and detail of every property, in card order."""
    html = render_html(card)
    page = Page(html)
    for index, row in enumerate(card.properties):
        assert page.by_id(f"property-{index}")["data-property"] == row.id
    assert page.tags["tr"] == 1 + len(card.properties)
    assert [text for text in page.text if text in {"property", "band", "kind", "trials", "hits", "detail"}] == [
        "property",
        "band",
        "kind",
        "trials",
        "hits",
        "detail",
    ]


def test_fixed_rule_row_is_plotted_against_min_hits_over_trials(card: VerdictCard) -> None:
    """A fixed rule's row carries its rate, Wilson bounds and threshold min_hits/trials, drawn where they say."""
    row = fixed_row(card)
    page = Page(render_html(card.model_copy(update={"properties": (card.properties[0], row)})))
    group = page.by_id("rate-1")
    interval = wilson(7, 10)
    assert group["data-property"] == "rate_fixed"
    assert group["data-rule"] == "fixed"
    assert float(group["data-rate"] or "nan") == pytest.approx(0.7)
    assert float(group["data-threshold"] or "nan") == pytest.approx(0.8)
    assert float(group["data-lower"] or "nan") == pytest.approx(interval.low, abs=1e-5)
    assert float(group["data-upper"] or "nan") == pytest.approx(interval.high, abs=1e-5)
    assert "data-p0" not in group
    # Geometry: the axis maps 0..1 onto x 180..500; threshold line, interval and dot sit on it.
    (threshold,) = page.by_class("threshold")
    assert float(threshold["x1"] or "nan") == pytest.approx(180 + 0.8 * 320)
    (dot,) = page.by_class("rate")
    assert float(dot["cx"] or "nan") == pytest.approx(180 + 0.7 * 320)
    (bar,) = page.by_class("interval")
    assert float(bar["x1"] or "nan") == pytest.approx(180 + interval.low * 320, abs=1e-3)
    # The safety row has no rate to plot.
    assert [g["data-property"] for g in page.by_class("rate-row")] == ["rate_fixed"]


def test_sprt_row_is_plotted_against_p0_and_p1(card: VerdictCard) -> None:
    """An SPRT row carries p0 and p1 (no single threshold) and draws both lines."""
    page = Page(render_html(card.model_copy(update={"properties": (sprt_row(card),)})))
    group = page.by_id("rate-0")
    assert group["data-rule"] == "sprt"
    assert (group["data-p0"], group["data-p1"], group["data-rate"]) == ("0.9", "0.6", "0.9")
    assert "data-threshold" not in group
    (p0,) = page.by_class("p0")
    (p1,) = page.by_class("p1")
    assert float(p0["x1"] or "nan") == pytest.approx(180 + 0.9 * 320)
    assert float(p1["x1"] or "nan") == pytest.approx(180 + 0.6 * 320)


def test_unreadable_rule_or_no_trials_draws_no_threshold_and_no_rate(card: VerdictCard) -> None:
    """A rule dict this gate cannot read and a row with 0 trials are drawn without threshold or dot, not a crash."""
    broken = stat_row(card, id="odd", rule={"rule": "bayes", "p": "<b>"}, trials=0, hits=0, interval=None)
    page = Page(render_html(card.model_copy(update={"properties": (broken,)})))
    group = page.by_id("rate-0")
    assert "data-rule" not in group and "data-rate" not in group
    assert (group["data-lower"], group["data-upper"]) == ("0", "1")
    assert page.by_class("threshold") == [] and page.by_class("rate") == []


def test_durations_are_dots_against_the_deadline_line(card: VerdictCard) -> None:
    """Each trial is a dot with its seconds; past the deadline it is class `over`; the deadline is a line."""
    row = stat_row(card, id="slow", deadline_s=2.0, durations_s=(0.5, 1.0, 3.0))
    page = Page(render_html(card.model_copy(update={"properties": (row,)})))
    group = page.by_id("durations-0")
    assert (group["data-property"], group["data-deadline"], group["data-trials"]) == ("slow", "2", "3")
    dots = page.by_class("duration")
    assert [d["data-seconds"] for d in dots] == ["0.5", "1", "3"]
    assert [d["data-seconds"] for d in page.by_class("over")] == ["3"]
    (deadline,) = page.by_class("deadline")
    assert deadline["data-seconds"] == "2"
    # One scale per row: the slowest trial (3 s) plus 5% spans the axis.
    assert float(dots[2]["cx"] or "nan") == pytest.approx(180 + 320 / 1.05)


def test_non_finite_durations_do_not_break_the_scale(card: VerdictCard) -> None:
    """A deadline of 0 and an infinite duration still give finite coordinates for the deadline line."""
    row = stat_row(card, id="odd", deadline_s=0.0, durations_s=(float("inf"), 0.0))
    page = Page(render_html(card.model_copy(update={"properties": (row,)})))
    (deadline,) = page.by_class("deadline")
    assert float(deadline["x1"] or "nan") == pytest.approx(180)


def test_freezes_and_ledger_actions_are_listed(card: VerdictCard) -> None:
    """Active and inactive freezes and each ledger action are list items naming their property."""
    entry = LedgerEntry(property_id="p", action=LedgerAction.CONSUMED, remaining=0, expires_at=NOW, detail="lost")
    page = Page(
        render_html(
            card.model_copy(
                update={"freeze_set": {"a": "F-1"}, "freezes_inactive": {"b": "expired"}, "ledger_actions": (entry,)}
            )
        )
    )
    freezes = page.by_class("freeze")
    assert [(f["data-property"], f["data-active"]) for f in freezes] == [("a", "true"), ("b", "false")]
    (action,) = page.by_class("ledger-action")
    assert (action["data-property"], action["data-action"], action["data-remaining"]) == ("p", "freeze_consumed", "0")
    empty = Page(render_html(card))
    assert len(empty.by_class("none")) == 2 and empty.by_class("freeze") == []


# --- hostile input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [*HOSTILE_PARTS, HOSTILE], ids=[*map(ascii, HOSTILE_PARTS), "all"])
def test_hostile_strings_add_no_element_attribute_or_script(card: VerdictCard, text: str) -> None:
    """Hostile ids, details, reasons, freezes and ledger details yield exactly the elements of a benign card:
    no script, no on* attribute, no tag the renderer does not emit, the CSP intact; the text is shown escaped."""
    hostile = hostile_card(card, text)
    html = render_html(hostile, hostile_records(hostile, text))
    html.encode("utf-8")  # a lone surrogate would make the page unwritable
    page = Page(html)
    benign_card = hostile_card(card, "x")
    benign = Page(render_html(benign_card, hostile_records(benign_card, "x")))
    assert page.by_class("trials")  # the records' blocks are drawn, hostile text and all
    assert page.tags == benign.tags
    assert set(page.tags) <= EMITTED
    assert "script" not in page.tags and "img" not in page.tags
    assert len(page.elements) == len(benign.elements)
    for (tag, attrs), (benign_tag, benign_attrs) in zip(page.elements, benign.elements, strict=True):
        assert not [name for name in attrs if name.startswith("on")], tag
        assert (tag, sorted(attrs)) == (benign_tag, sorted(benign_attrs))
    csp = [attrs for tag, attrs in page.elements if attrs.get("http-equiv") == "Content-Security-Policy"]
    assert csp == [{"http-equiv": "Content-Security-Policy", "content": CSP}]
    lowered = html.lower()
    assert "<script" not in lowered and "<img" not in lowered and "<a " not in lowered
    assert lowered.count("</svg>") == 2
    assert "\x00" not in html and "\x1b" not in html


def test_trials_to_look_at_show_each_miss_and_a_passing_sample_naming_records(card: VerdictCard) -> None:
    """With records, each property gets an open block when a trial missed (its message and record digest
    shown) and a closed one when none did; without records the page says none were given."""
    records = hostile_records(card, "total 0 != 12.10")
    page = Page(render_html(card, records))
    blocks = page.by_class("trials")
    assert [b["data-property"] for b in blocks] == [row.id for row in card.properties]
    assert all((b["data-problems"], b["data-passes"], "open" in b) == ("1", "1", True) for b in blocks)
    text = "\n".join(page.text)
    assert "detail: total 0 != 12.10" in text and record_digest(records[0]) in text
    hits_only = [r for r in records if r.outcome.kind is OutcomeKind.HIT]
    closed = Page(render_html(card, hits_only)).by_class("trials")
    assert all(b["data-problems"] == "0" and "open" not in b for b in closed)
    assert len(Page(render_html(card)).by_class("no-records")) == 1


def test_hostile_text_is_shown_as_text_with_visible_escapes(card: VerdictCard) -> None:
    """The detail cell shows the markup as text, and NUL, ESC and a lone surrogate as \\x00, \\x1b, \\ud800."""
    page = Page(render_html(hostile_card(card, HOSTILE)))
    text = "".join(page.text)
    assert "<script>alert(1)</script>" in text
    assert '"><img src=x onerror=alert(1)>' in text
    assert "\\x1b[31mred" in text and "nul\\x00byte" in text and "lone\\ud800surrogate" in text
    row = page.by_id("property-0")
    assert row["data-property"] == card.properties[0].id + HOSTILE.replace("\x1b", "\\x1b").replace(
        "\x00", "\\x00"
    ).replace("\ud800", "\\ud800")


# --- wiring ------------------------------------------------------------------------------------------


def test_run_writes_the_html_report_of_the_card_it_wrote(tmp_path: Path) -> None:
    """run_gate with --report-html writes render_html of the very card it wrote and its stored records."""
    suite = build_suite(tmp_path)
    page = tmp_path / "reports" / "report.html"
    suite.request = replace(suite.request, reports=ReportTargets(report_html=page))
    run(suite, good)
    card = read_card(suite.card)
    assert page.read_text(encoding="utf-8") == render_html(card, verified_records(card, suite.card))


def test_html_report_inside_the_patched_tree_is_refused_before_any_trial(tmp_path: Path) -> None:
    """--report-html inside the patched tree is a usage error raised before the executor opens."""
    from gate.run.executors.mock import MockExecutor

    suite = build_suite(tmp_path)
    inside = suite.request.workdir / "report.html"
    request = replace(suite.request, reports=ReportTargets(report_html=inside))
    executor = MockExecutor(good)
    with pytest.raises(UsageError, match="inside the patched tree"):
        run_request(request, executor, lambda _: None)
    assert executor.calls == []
    assert not inside.exists()


def test_html_report_path_that_is_a_directory_or_the_card_is_refused(tmp_path: Path) -> None:
    """`gate run --report-html` naming a directory, or the same file as --card, exits 64 before anything runs."""
    work = tmp_path / "work"
    work.mkdir()
    suite = str(tmp_path / "gate.toml")
    assert main(["run", "--suite", suite, "--workdir", str(work), "--report-html", str(tmp_path)]) == RET_USAGE
    card = str(tmp_path / "card.json")
    assert main(["run", "--workdir", str(work), "--card", card, "--report-html", card]) == RET_USAGE


def test_gate_report_writes_the_html_report_from_a_card(card: VerdictCard, tmp_path: Path) -> None:
    """`gate report CARD --report-html FILE` writes render_html of the card read back; over the card it is refused."""
    path = tmp_path / "card.json"
    path.write_text(card.model_dump_json(indent=2))
    page = tmp_path / "r.html"
    assert main(["report", str(path), "--report-html", str(page)]) == RET_OK
    assert page.read_text(encoding="utf-8") == render_html(card)
    assert main(["report", str(path), "--report-html", str(path)]) == RET_USAGE
    assert read_card(path) == card
