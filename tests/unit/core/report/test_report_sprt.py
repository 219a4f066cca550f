"""The SPRT path of the HTML report: `SprtRule.llr_path`, `gate.core.report.html_sprt` (the path as the
fold counts the trials, and its SVG) and its wiring through `gate run` and `gate report`; no Docker."""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st
from support.html_page import Page
from support.mini_suite import STAT, Suite, build_suite, but, run, stdout

from gate.cli.main import main
from gate.core.card.card import PropertyRow, VerdictCard
from gate.core.card.evidence import TrialRecord
from gate.core.errors import RET_CONFIG, RET_OK
from gate.core.report.html import render_html
from gate.core.report.html_sprt import sprt_path
from gate.core.suite.trial import Observation, TrialSpec
from gate.core.verdicts.bands import SprtRule, wilson
from gate.core.verdicts.verdict import Band, Kind, Outcome, OutcomeKind, fold
from gate.io.artifacts import read_card
from gate.io.evidence import verified_records
from gate.io.reports import ReportTargets
from unit.core.verdicts.test_sprt import sprt_rules

RULE = SprtRule(p0=0.8, p1=0.6, alpha=0.05, beta=0.05, max_trials=60, wave=5)
RULE_DICT = RULE.model_dump(mode="json")
HIT, MISS, TIMEOUT, FAULT = OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.TIMEOUT, OutcomeKind.FAULT

kinds = st.lists(st.sampled_from(list(OutcomeKind)), max_size=150)


@pytest.fixture(autouse=True)
def _logs_back_to_default() -> object:
    """`gate report` (main) routes logs to the captured stderr, which closes after the test: undo it."""
    yield
    structlog.reset_defaults()


def outcomes_of(kinds: Sequence[OutcomeKind], order: Sequence[int] | None = None) -> list[Outcome]:
    """One outcome per kind, trial i of kind kinds[i], listed in `order` (default: trial order)."""
    order = range(len(kinds)) if order is None else order
    return [Outcome(trial_index=i, kind=kinds[i], detail=f"trial {i}") for i in order]


def records_of(property_id: str, kinds: Sequence[OutcomeKind]) -> list[TrialRecord]:
    return [
        TrialRecord(
            property_id=property_id,
            trial_index=o.trial_index,
            observation=Observation(run_id="r", property_id=property_id, trial_index=o.trial_index),
            outcome=o,
        )
        for o in outcomes_of(kinds)
    ]


def sprt_row(card: VerdictCard, kinds: Sequence[OutcomeKind], name: str = "rate_sprt") -> PropertyRow:
    """A statistical SPRT row folded from `kinds`, as the run would write it."""
    verdict = fold(property_id=name, band=Band.STATISTICAL, fixture_digest="f", outcomes=outcomes_of(kinds), rule=RULE)
    base = next(row for row in card.properties if row.band is Band.STATISTICAL)
    return base.model_copy(
        update={
            "id": name,
            "kind": verdict.kind,
            "hits": verdict.hits,
            "trials": verdict.trials,
            "interval": wilson(verdict.hits, verdict.trials),
            "rule": RULE_DICT,
            "detail": verdict.detail,
        }
    )


def points(polyline: dict[str, str | None]) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in (polyline["points"] or "").split())]


# --- the path ----------------------------------------------------------------------------------------


@given(rule=sprt_rules, kinds=kinds, data=st.data())
def test_path_ends_where_the_fold_stands_with_one_point_per_counted_trial(rule, kinds, data) -> None:
    """In any arrival order, the path has one point per trial the fold counts and ends at the llr `state` judges."""
    order = data.draw(st.permutations(range(len(kinds))))
    outcomes = outcomes_of(kinds, order)
    verdict = fold(property_id="p", band=Band.STATISTICAL, fixture_digest="f", outcomes=outcomes, rule=rule)
    path = sprt_path(rule, outcomes)
    assert path.trials == verdict.trials == len(kinds)
    assert path.hits == verdict.hits
    assert path.final == rule.llr(verdict.hits, verdict.trials)
    assert path.decision == rule.state(verdict.hits, verdict.trials)
    expected = "pass" if path.final <= rule.lower else "below" if path.final >= rule.upper else None
    if expected is not None:
        assert path.decision == expected
    if kinds and TIMEOUT not in kinds and FAULT not in kinds:
        assert (verdict.kind is Kind.PASS) == (path.decision == "pass")
    assert path.gaps == sum(1 for k in kinds if k in (TIMEOUT, FAULT))


@given(rule=sprt_rules, hits=st.lists(st.booleans(), max_size=150))
def test_llr_path_steps_by_the_rules_increments(rule, hits) -> None:
    """Each point is the one before plus `hit_step` for a hit and `miss_step` otherwise; the last is `llr`."""
    path = rule.llr_path(hits)
    assert len(path) == len(hits)
    for before, after, hit in zip((0.0, *path), path, hits, strict=False):
        assert after - before == pytest.approx(rule.hit_step if hit else rule.miss_step, abs=1e-9)
    if hits:
        assert path[-1] == rule.llr(sum(hits), len(hits))


def test_timeouts_and_faults_count_as_trials_without_a_hit() -> None:
    """Like the fold's counts, a timeout and a fault each add `miss_step`, in trial-index order."""
    path = sprt_path(RULE, outcomes_of([HIT, TIMEOUT, FAULT, MISS], order=[3, 1, 0, 2]))
    step_hit, step_miss = math.log(0.6 / 0.8), math.log(0.4 / 0.2)
    assert path.points == pytest.approx(
        [step_hit, step_hit + step_miss, step_hit + 2 * step_miss, step_hit + 3 * step_miss]
    )
    assert (path.hits, path.trials, path.gaps) == (1, 4, 2)


# --- the SVG -----------------------------------------------------------------------------------------


def test_failing_sprt_path_is_drawn_one_point_per_trial_past_the_reject_line(card: VerdictCard) -> None:
    """Five misses: five polyline points rising left to right, the last above line A; data- attributes agree."""
    row = sprt_row(card, [MISS] * 5)
    page = Page(render_html(card.model_copy(update={"properties": (row,)}), records_of(row.id, [MISS] * 5)))
    assert page.by_id("sprt-0")["role"] == "img"
    (group,) = page.by_class("sprt-path")
    assert group["data-property"] == "rate_sprt" and group["data-decision"] == "below"
    assert (group["data-trials"], group["data-hits"], group["data-gaps"]) == ("5", "0", "0")
    assert float(group["data-final-llr"] or "nan") == pytest.approx(RULE.llr(0, 5), rel=1e-5)
    assert float(group["data-upper"] or "nan") == pytest.approx(RULE.upper, rel=1e-5)
    assert float(group["data-lower"] or "nan") == pytest.approx(RULE.lower, rel=1e-5)
    (polyline,) = page.by_class("llr")
    drawn = points(polyline)
    assert len(drawn) == 5
    assert [x for x, _ in drawn] == sorted(x for x, _ in drawn)
    assert [y for _, y in drawn] == sorted((y for _, y in drawn), reverse=True)  # SVG y grows downwards
    (reject,) = page.by_class("reject")
    (accept,) = page.by_class("accept")
    assert drawn[-1][1] <= float(reject["y1"] or "nan") < float(accept["y1"] or "nan")
    assert float(reject["data-llr"] or "nan") == pytest.approx(RULE.upper, rel=1e-5)


def test_passing_sprt_path_ends_below_the_accept_line(card: VerdictCard) -> None:
    """Eleven straight hits pass at p0 .8, p1 .6: the last point sits at or under line B."""
    row = sprt_row(card, [HIT] * 11)
    assert row.kind is Kind.PASS
    page = Page(render_html(card.model_copy(update={"properties": (row,)}), records_of(row.id, [HIT] * 11)))
    (group,) = page.by_class("sprt-path")
    assert group["data-decision"] == "pass"
    (accept,) = page.by_class("accept")
    assert points(page.by_class("llr")[0])[-1][1] >= float(accept["y1"] or "nan")


def test_without_records_the_page_says_the_evidence_was_not_given(card: VerdictCard) -> None:
    """The card alone still renders; the SPRT section says the records were not given and draws no path."""
    row = sprt_row(card, [MISS] * 5)
    page = Page(render_html(card.model_copy(update={"properties": (row,)})))
    assert "not given" in "".join(page.text)
    page.by_id("sprt-no-evidence")
    assert page.by_class("sprt-path") == [] and "polyline" not in page.tags
    # A card with no SPRT row has no SPRT section at all.
    assert "sprt-no-evidence" not in render_html(card)


def test_records_that_disagree_with_the_row_draw_no_path(card: VerdictCard) -> None:
    """Records folding to other counts than the row's give a note naming both, not a path that contradicts the row."""
    row = sprt_row(card, [MISS] * 5)
    page = Page(render_html(card.model_copy(update={"properties": (row,)}), records_of(row.id, [HIT] * 4)))
    note = page.by_id("sprt-0")
    assert note["class"] == "sprt-note"
    assert "4/4 hits but the row says 0/5" in "".join(page.text)
    assert page.by_class("sprt-path") == []


def test_a_timeout_is_drawn_as_a_trial_and_the_caption_says_the_sprt_did_not_decide(card: VerdictCard) -> None:
    """A row with a timeout keeps its trial on the path (data-gaps 1) and says its kind came from the fold."""
    kinds = [HIT, HIT, TIMEOUT]
    row = sprt_row(card, kinds)
    assert row.kind is Kind.INCONCLUSIVE_TIMEOUT
    page = Page(render_html(card.model_copy(update={"properties": (row,)}), records_of(row.id, kinds)))
    (group,) = page.by_class("sprt-path")
    assert (group["data-trials"], group["data-gaps"], group["data-kind"]) == ("3", "1", "inconclusive_timeout")
    assert len(points(page.by_class("llr")[0])) == 3
    assert "not by the SPRT (kind inconclusive_timeout)" in "".join(page.text)


def test_hostile_sprt_property_id_stays_text(card: VerdictCard) -> None:
    """An SPRT row (and its records) named with markup, ESC, NUL and a bidi override adds no element to the page."""
    name = "<script>alert(1)</script><img src=x onerror=alert(1)>\x1b[2J\x00\u202e"
    row = sprt_row(card, [MISS] * 5, name=name)
    html = render_html(card.model_copy(update={"properties": (row,)}), records_of(name, [MISS] * 5))
    benign = render_html(
        card.model_copy(update={"properties": (sprt_row(card, [MISS] * 5, "x"),)}), records_of("x", [MISS] * 5)
    )
    assert Page(html).tags == Page(benign).tags
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "\x00" not in html and "\x1b" not in html and "\u202e" not in html
    text = "".join(Page(html).text)
    assert "<script>alert(1)</script>" in text and "\\x1b[2J\\x00\\u202e" in text


# --- wiring ------------------------------------------------------------------------------------------


def wrong_tool(spec: TrialSpec, fixture: bytes) -> Observation:
    """The statistical probe picks the wrong tool: a miss on every trial."""
    return Observation.of(spec, exit_code=0, image_id="sha256:mock", duration_s=0.25, stdout=stdout({"tool": "no"}))


def sprt_suite(tmp_path: Path) -> Suite:
    """The mini suite with its statistical property switched to the SPRT (p0 .8, p1 .6, waves of 5)."""
    suite = build_suite(tmp_path)
    toml = suite.request.suite
    toml.write_text(toml.read_text() + 'rule = "sprt"\np0 = 0.8\np1 = 0.6\nmax_trials = 60\nwave = 5\n')
    return suite


def test_run_and_report_draw_the_path_from_the_records(tmp_path: Path) -> None:
    """`gate run --report-html` draws the path from its in-memory records; `gate report`, the same from the store."""
    suite = sprt_suite(tmp_path)
    page = tmp_path / "run.html"
    suite.request = replace(suite.request, reports=ReportTargets(report_html=page))
    run(suite, but(STAT, wrong_tool))
    card = read_card(suite.card)
    row = next(r for r in card.properties if r.id == STAT)
    assert (row.trials, row.hits) == (5, 0)
    written = page.read_text(encoding="utf-8")
    assert written == render_html(card, verified_records(card, suite.card))
    (group,) = Page(written).by_class("sprt-path")
    assert (group["data-trials"], group["data-decision"]) == ("5", "below")
    again = tmp_path / "again.html"
    assert main(["report", str(suite.card), "--report-html", str(again)]) == RET_OK
    assert again.read_text(encoding="utf-8") == written


def test_report_of_a_card_without_its_store_says_not_given(tmp_path: Path) -> None:
    """A card copied away from its evidence store still reports; its page says the records were not given."""
    suite = sprt_suite(tmp_path)
    run(suite, but(STAT, wrong_tool))
    alone = tmp_path / "elsewhere" / "card.json"
    alone.parent.mkdir()
    shutil.copy(suite.card, alone)
    page = tmp_path / "r.html"
    assert main(["report", str(alone), "--report-html", str(page)]) == RET_OK
    Page(page.read_text(encoding="utf-8")).by_id("sprt-no-evidence")


def test_report_refuses_a_tampered_store_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A record edited in place: `gate report --report-html` exits 65 with one line naming it and writes no page."""
    suite = sprt_suite(tmp_path)
    run(suite, but(STAT, wrong_tool))
    victim = sorted((suite.card.parent / "evidence").glob("*.json"))[0]
    victim.write_bytes(victim.read_bytes() + b" ")
    page = tmp_path / "r.html"
    capsys.readouterr()
    assert main(["report", str(suite.card), "--report-html", str(page)]) == RET_CONFIG
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and victim.name in err and "tampered evidence record" in err
    assert not page.exists()
    # JUnit alone does not read the store.
    assert main(["report", str(suite.card), "--junitxml", str(tmp_path / "j.xml")]) == RET_OK
