"""The CI reports of a verdict card (gate.core.report.junit, gate.core.report.markdown) and their wiring:
`gate run --junitxml/--summary-md`, $GITHUB_STEP_SUMMARY and `gate report CARD`; no Docker."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from support.mini_suite import CONTRACT, build_suite, but, good, run, run_request, stdout

from gate.cli.main import main
from gate.core.card.card import PropertyRow, VerdictCard
from gate.core.errors import RET_NOINPUT, RET_OK, RET_USAGE, UsageError
from gate.core.report.junit import render_junit
from gate.core.report.markdown import render_markdown
from gate.core.suite.trial import Observation
from gate.core.verdicts.verdict import Band, Kind
from gate.io.artifacts import read_card
from gate.io.reports import STEP_SUMMARY_ENV, ReportTargets

# Everything a patch could put into a detail to break a report or pass for the gate's own words.
HOSTILE = "| pass |\n# job: accepted <script>alert(1)</script> \x1b[32m green \x00 ]]> \x07\x0b\ud800 `code` [x](y)"


def with_rows(card: VerdictCard, *rows: PropertyRow) -> VerdictCard:
    return card.model_copy(update={"properties": rows})


def row(card: VerdictCard, kind: Kind, name: str, **update: object) -> PropertyRow:
    base = card.properties[1]
    return base.model_copy(update={"id": name, "kind": kind, "detail": f"{kind} happened", **update})


ALL_KINDS = [(kind, f"p_{kind}") for kind in Kind]


def parse(data: bytes) -> ET.Element:
    return ET.fromstring(data)


# --- JUnit XML ---------------------------------------------------------------------------------------


def test_junit_maps_every_kind_to_pass_failure_or_error_never_skipped(card: VerdictCard) -> None:
    """pass has no child, fail_* and inconclusive_* are <failure> of their own type, harness_error an <error>."""
    root = parse(render_junit(with_rows(card, *(row(card, k, n) for k, n in ALL_KINDS))))
    suite = root.find("testsuite")
    assert suite is not None
    counts = [suite.get(name) for name in ("tests", "failures", "errors", "skipped")]
    assert counts == ["6", "4", "1", "0"]
    assert root.findall(".//skipped") == []
    outcome = {}
    for case in suite.findall("testcase"):
        children = [c for c in case if c.tag != "properties"]
        outcome[case.get("name")] = [(c.tag, c.get("type"), c.get("message")) for c in children]
    assert outcome == {
        "p_pass": [],
        "p_fail_safety": [("failure", "fail_safety", "fail_safety happened")],
        "p_fail_contract": [("failure", "fail_contract", "fail_contract happened")],
        "p_inconclusive_timeout": [("failure", "inconclusive_timeout", "inconclusive_timeout happened")],
        "p_inconclusive_sample": [("failure", "inconclusive_sample", "inconclusive_sample happened")],
        "p_harness_error": [("error", "harness_error", "harness_error happened")],
    }


def test_junit_testcase_carries_band_and_summed_durations(card: VerdictCard) -> None:
    """classname is the band and time the sum of the row's trial durations; a row without durations has no time."""
    timed = row(card, Kind.PASS, "timed", band=Band.STATISTICAL, durations_s=(0.25, 0.5, 1.0))
    untimed = row(card, Kind.PASS, "untimed", band=Band.SAFETY, durations_s=())
    cases = {c.get("name"): c for c in parse(render_junit(with_rows(card, timed, untimed))).iter("testcase")}
    assert (cases["timed"].get("classname"), cases["timed"].get("time")) == ("statistical", "1.750")
    assert (cases["untimed"].get("classname"), cases["untimed"].get("time")) == ("safety", None)


def test_junit_frozen_property_keeps_its_kind_and_says_it_did_not_vote(card: VerdictCard) -> None:
    """A frozen inconclusive row is still a <failure>, with voting=false and frozen_by among its properties."""
    frozen = row(card, Kind.INCONCLUSIVE_SAMPLE, "frozen", voting=False, frozen_by="FRZ-1")
    case = next(parse(render_junit(with_rows(card, frozen))).iter("testcase"))
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["voting"] == "false" and props["frozen_by"] == "FRZ-1" and props["kind"] == "inconclusive_sample"
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "inconclusive_sample"
    assert "did not vote: FRZ-1" in (failure.text or "")


def test_junit_testsuite_properties_carry_job_status_and_exit_code(card: VerdictCard) -> None:
    """The job's status, exit code and reasons are <properties> of the testsuite."""
    blocked = card.model_copy(update={"status": "blocked", "exit_code": 1, "reasons": ("a: fail_contract",)})
    suite = parse(render_junit(blocked)).find("testsuite")
    assert suite is not None and suite.get("name") == card.suite
    props = [(p.get("name"), p.get("value")) for p in suite.findall("properties/property")]
    assert {("job_status", "blocked"), ("exit_code", "1"), ("reason", "a: fail_contract")} <= set(props)


def test_junit_stays_well_formed_with_a_hostile_detail(card: VerdictCard) -> None:
    """NUL, other C0 controls, a lone surrogate, "]]>" and "<script>" in a detail, a reason and an id still
    parse, as escaped text: no character XML 1.0 forbids is written."""
    bad = row(card, Kind.FAIL_CONTRACT, "evil\x00id", detail=HOSTILE)
    hostile = with_rows(card, bad).model_copy(update={"reasons": (HOSTILE,), "status": "blocked", "exit_code": 1})
    data = render_junit(hostile)
    root = parse(data)
    failure = root.find(".//failure")
    assert failure is not None and failure.get("type") == "fail_contract"
    message = failure.get("message") or ""
    assert "\\x00" in message and "\\x1b" in message and "\\x07" in message and "\\ud800" in message
    assert "<script>alert(1)</script>" in message and "]]>" in message  # kept as text, escaped by ElementTree
    assert root.find(".//testcase").get("name") == "evil\\x00id"  # type: ignore[union-attr]
    assert not re.search(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", data)
    assert b"<script>" not in data
    data.decode("utf-8")  # no lone surrogate reached the encoder


# --- Markdown --------------------------------------------------------------------------------------


def test_markdown_table_has_one_row_per_property_and_the_verdict_first(card: VerdictCard) -> None:
    """The first line is the verdict heading, then one table row per property with its counts and detail."""
    text = render_markdown(card)
    lines = text.splitlines()
    assert lines[0].startswith("## ") and "job accepted (exit 0)" in lines[0]
    rows = [line for line in lines if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(card.properties)
    assert card.fixture.seal[:16] in text and "mock" in text


def test_markdown_hostile_detail_cannot_break_the_table_or_fake_the_verdict(card: VerdictCard) -> None:
    """A detail with "| pass |", a newline and "# job: accepted", <script>, an ANSI colour and NUL stays one
    inert cell: the row keeps 7 cell borders, no other line is a heading, and nothing raw gets through."""
    bad = row(card, Kind.FAIL_CONTRACT, "evil", detail=HOSTILE)
    hostile = with_rows(card, bad).model_copy(update={"reasons": (HOSTILE,), "status": "blocked", "exit_code": 1})
    text = render_markdown(hostile)
    lines = text.splitlines()
    assert lines[0].startswith("## ") and "job blocked (exit 1)" in lines[0]
    assert [line for line in lines if line.startswith("#")] == [lines[0]]
    evil = next(line for line in lines if line.startswith("| evil"))
    assert evil.count("|") == 7
    assert "| pass |" not in evil and "&#124; pass &#124;" in evil
    assert "&lt;script&gt;" in evil and "<script" not in text
    assert "`" not in evil and "[x](y)" not in evil
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text)
    assert "\\x1b" in evil and "\\x00" in evil and "\\n" in evil
    assert "&#35; job: accepted" in evil  # the words survive as text, not as a heading
    reason = next(line for line in lines if line.startswith("- "))
    assert "\n" not in reason and "<script" not in reason
    text.encode("utf-8")  # the lone surrogate was escaped


def test_markdown_marks_a_frozen_row_as_not_voting(card: VerdictCard) -> None:
    """A non-voting row's kind cell says it did not vote and why."""
    frozen = row(card, Kind.INCONCLUSIVE_SAMPLE, "frozen", voting=False, frozen_by="FRZ-1")
    assert "| inconclusive&#95;sample (not voting: FRZ-1) |" in render_markdown(with_rows(card, frozen))


# --- wiring: run, report, step summary -----------------------------------------------------------


def test_run_writes_both_reports_right_after_the_card(tmp_path: Path) -> None:
    """run_gate with report targets writes JUnit XML and Markdown of the very card it wrote."""
    suite = build_suite(tmp_path)
    junit, summary = tmp_path / "reports" / "junit.xml", tmp_path / "reports" / "summary.md"
    suite.request = replace(suite.request, reports=ReportTargets(junit, summary))
    wrong = but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({"total": "9.99"})))
    result, _ = run(suite, wrong)
    assert junit.read_bytes() == render_junit(read_card(suite.card))
    assert summary.read_text() == render_markdown(result.card)
    suite_el = ET.parse(junit).getroot().find("testsuite")
    assert suite_el is not None and (suite_el.get("tests"), suite_el.get("failures")) == ("3", "1")


def test_report_inside_the_patched_tree_is_refused_before_any_trial(tmp_path: Path) -> None:
    """A report path inside the patched tree (it would change the tree `accept` digests) is a usage error
    raised before the executor opens."""
    from gate.run.executors.mock import MockExecutor

    suite = build_suite(tmp_path)
    inside = suite.request.workdir / "junit.xml"
    request = replace(suite.request, reports=ReportTargets(junitxml=inside))
    executor = MockExecutor(good)
    with pytest.raises(UsageError, match="inside the patched tree"):
        run_request(request, executor, lambda _: None)
    assert executor.calls == []
    assert not inside.exists()


@pytest.mark.parametrize("flag", ["--junitxml", "--summary-md"])
def test_unwritable_report_path_is_refused_by_the_command_line(tmp_path: Path, flag: str) -> None:
    """`gate run` with a report path that is a directory exits 64 before reading the suite or running anything."""
    work = tmp_path / "work"
    work.mkdir()
    code = main(["run", "--suite", str(tmp_path / "gate.toml"), "--workdir", str(work), flag, str(tmp_path)])
    assert code == RET_USAGE


def test_report_path_that_names_the_card_is_refused(tmp_path: Path) -> None:
    """`gate run --junitxml` naming the same file as --card exits 64."""
    work = tmp_path / "work"
    work.mkdir()
    card = str(tmp_path / "card.json")
    assert main(["run", "--workdir", str(work), "--card", card, "--junitxml", card]) == RET_USAGE


def test_gate_report_writes_the_same_reports_from_a_card(
    card: VerdictCard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gate report CARD` writes the bytes the renderers give for the card read back, and appends to
    $GITHUB_STEP_SUMMARY without replacing what earlier steps wrote."""
    path = tmp_path / "card.json"
    path.write_text(card.model_dump_json(indent=2))
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(step))
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    argv = ["report", str(path), "--junitxml", str(junit), "--summary-md", str(summary)]
    assert main(argv) == RET_OK
    assert main(argv) == RET_OK
    assert junit.read_bytes() == render_junit(card)
    assert summary.read_text() == render_markdown(card)
    assert step.read_text() == "earlier step\n" + ("\n" + render_markdown(card)) * 2


def test_gate_report_refuses_nothing_to_write_a_missing_card_and_overwriting_the_card(
    card: VerdictCard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No report named: 64; a card that does not exist: 66; a report over the card itself: 64, card intact."""
    path = tmp_path / "card.json"
    path.write_text(card.model_dump_json())
    assert main(["report", str(path)]) == RET_USAGE
    assert main(["report", str(tmp_path / "nope.json"), "--summary-md", str(tmp_path / "s.md")]) == RET_NOINPUT
    assert main(["report", str(path), "--junitxml", str(path)]) == RET_USAGE
    assert read_card(path) == card
