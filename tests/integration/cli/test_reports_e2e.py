"""What a reviewer and a CI system see, end to end on real Docker and headless Chromium: the invoice
example with a good patch, a statistical patch that always picks the wrong tool, and a hostile patch
whose output carries markup, ANSI sequences and NUL bytes, each run through the `gate` console script
with every report asked for. Progress shows on a terminal; the evidence names the failing assertion;
JUnit XML reads with the right counts; the Markdown, HTML and terminal stay inert; re-folding agrees;
`gate diff` names the change."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gate_runs import EXAMPLE, GATE, oracle_args
from junitparser import Failure, JUnitXml
from support.example_repo import example_repo

from gate.core.errors import RET_BLOCKED, RET_OK

# One worker takes the whole module (--dist loadgroup): its `runs` (three gate runs with every report)
# and `chromium` are made once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("reports_e2e")]

STAT = "tool_choice_rate"
GOOD_PICK = "name = random.Random(seed).choice([n for s, n in scored if s == best])"
# Always a tool that scored below the best: the statistical property misses on every trial.
WRONG_PICK = "name = random.Random(seed).choice([n for s, n in scored if s < best])"
# Markup, a fake verdict line, an ANSI clear-screen and colour, NUL, CR and a bidi override.
HOSTILE = "<script>alert(1)</script>\x1b[2J\x1b[1;32mjob accepted\x00\r\n| tool_choice_rate | pass |\u202e"
HOSTILE_PICK = f"import sys\n    sys.stderr.write({HOSTILE!r} * 3)\n    name = {HOSTILE!r}"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class Outcome:
    """One patch's `gate run` (its exit, stderr as a terminal or a pipe saw it) and the files it wrote."""

    code: int
    stderr: str
    folder: Path

    @property
    def card_path(self) -> Path:
        return self.folder / "card.json"

    @property
    def card(self) -> dict:
        return json.loads(self.card_path.read_text())

    def row(self, pid: str) -> dict:
        return next(row for row in self.card["properties"] if row["id"] == pid)


def _example(tmp: Path) -> Path:
    """The invoice example with two more patches, made from the good one by replacing its tool choice."""
    example = tmp / "invoice"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__"))
    good = example / "patches" / "good"
    for name, pick in (("wrong_tool", WRONG_PICK), ("hostile", HOSTILE_PICK)):
        shutil.copytree(good, example / "patches" / name)
        api = example / "patches" / name / "invoicing" / "api.py"
        assert GOOD_PICK in api.read_text()
        api.write_text(api.read_text().replace(GOOD_PICK, pick))
    return example


def _gate_run(example: Path, patch: str, folder: Path, *, terminal: bool) -> Outcome:
    """`gate run --base` on the patch with JUnit XML, Markdown, HTML and a step summary; stderr on a
    pseudo-terminal when `terminal`, so rich draws its progress as it would for a person."""
    folder.mkdir(parents=True)
    repo = example_repo(folder / "repo", patch, source=example)
    argv = [str(GATE), "--log-level", "warning", "run", *oracle_args(repo), "--retries", "0", "--new-ledger"]
    argv += ["--card", str(folder / "card.json"), "--junitxml", str(folder / "junit.xml")]
    argv += ["--summary-md", str(folder / "summary.md"), "--report-html", str(folder / "report.html")]
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(folder / "step-summary.md"), "TERM": "xterm", "COLUMNS": "120"}
    if not terminal:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        return Outcome(done.returncode, done.stderr, folder)
    primary, secondary = os.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(primary, 65536)
            except OSError:  # EIO once the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=secondary, env=env)
        os.close(secondary)
        proc.communicate(timeout=300)
        reader.join(timeout=10)
    finally:
        os.close(primary)
    return Outcome(proc.returncode, b"".join(chunks).decode("utf-8", "replace"), folder)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> dict[str, Outcome]:
    """The good, wrong_tool (on a terminal) and hostile patches, each run once with every report."""
    tmp = tmp_path_factory.mktemp("reports")
    example = _example(tmp)
    return {
        patch: _gate_run(example, patch, tmp / patch, terminal=patch == "wrong_tool")
        for patch in ("good", "wrong_tool", "hostile")
    }


def _gate(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(GATE), *args], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_failing_statistical_patch_shows_progress_on_a_terminal(runs: dict[str, Outcome]) -> None:
    """On a terminal the run draws per-property progress: the statistical property's 10 of 10 trials."""
    wrong = runs["wrong_tool"]
    assert wrong.code == RET_OK, wrong.stderr  # inconclusive_sample blocks the merge, not the run
    assert wrong.row(STAT)["kind"] == "inconclusive_sample" and wrong.row(STAT)["hits"] == 0
    shown = ANSI.sub("", wrong.stderr)
    assert STAT in shown and "10/10" in shown, shown[-2000:]
    assert "\x1b[" in wrong.stderr  # drawn live, with cursor movement: a terminal saw it
    assert "\x1b[" not in runs["good"].stderr  # off a terminal: no bars, no escape codes


def test_the_evidence_names_the_failing_assertion(runs: dict[str, Outcome]) -> None:
    """Every trial of the statistical property is kept by content and names the check's message, and the
    card's detail and `gate evidence` quote them."""
    wrong = runs["wrong_tool"]
    records = [json.loads(p.read_text()) for p in (wrong.folder / "evidence").glob("*.json")]
    stat = [r for r in records if r["property_id"] == STAT]
    assert len(stat) == 10 and {r["outcome"]["kind"] for r in stat} == {"miss"}
    assert all(re.search(r"chose (resend_invoice|update_address)", r["outcome"]["detail"]) for r in stat)
    assert "first misses: trial 0: chose " in wrong.row(STAT)["detail"]
    view = _gate("evidence", str(wrong.card_path), "--property", STAT)
    assert view.returncode == RET_OK, view.stderr
    assert re.search(r"chose (resend_invoice|update_address)", view.stdout) and "miss" in view.stdout, view.stdout


def test_junit_xml_reads_with_the_right_counts(runs: dict[str, Outcome]) -> None:
    """A JUnit parser reads one case per property; the inconclusive statistical row is a failure of its own
    type, never skipped; the good card has no failure."""
    for patch, failing in (("good", set()), ("wrong_tool", {STAT}), ("hostile", {STAT})):
        outcome = runs[patch]
        suites = list(JUnitXml.fromfile(str(outcome.folder / "junit.xml")))
        cases = [case for suite in suites for case in suite]
        assert len(cases) == len(outcome.card["properties"]) == 5
        failed = {case.name: case.result for case in cases if case.result}
        assert set(failed) == failing, patch
        for results in failed.values():
            assert [type(r) for r in results] == [Failure] and results[0].type == "inconclusive_sample"
        total = sum(suite.tests for suite in suites), sum(suite.failures for suite in suites)
        assert total == (5, len(failing)) and sum(suite.skipped for suite in suites) == 0


def test_the_markdown_summary_and_step_summary_name_the_row(runs: dict[str, Outcome]) -> None:
    """The Markdown summary has the gate's verdict line and one row per property; the step summary holds it."""
    wrong = runs["wrong_tool"]
    markdown = (wrong.folder / "summary.md").read_text()
    assert markdown in (wrong.folder / "step-summary.md").read_text()
    # Markdown-active characters of card text arrive as entities (`_` as &#95;), rendered as themselves.
    shown = html.unescape(markdown)
    assert re.search(rf"^\| {STAT} \| statistical \| inconclusive_sample \| 10 \| 0 \| 0/10 hits", shown, re.M)
    assert re.search(r"^## .* probegate: job inconclusive \(exit 0\)$", shown, re.M), shown


def test_a_hostile_patch_leaves_every_report_intact_and_inert(runs: dict[str, Outcome]) -> None:
    """The hostile output reaches the card's detail, yet no report carries a raw ESC, NUL, CR or bidi mark,
    no line of the Markdown or the terminal starts with the patch's fake verdict, the HTML has no live
    markup from it, and the JUnit XML is well-formed (read above)."""
    hostile = runs["hostile"]
    assert "<script>" in hostile.row(STAT)["detail"]  # the patch's text did arrive
    texts = {name: (hostile.folder / name).read_text() for name in ("summary.md", "report.html", "junit.xml")}
    texts["stderr"] = hostile.stderr
    texts["gate evidence"] = _gate("evidence", str(hostile.card_path)).stdout
    for name, text in texts.items():
        for raw in ("\x1b", "\x00", "\r", "\u202e"):
            assert raw not in text, (name, repr(raw))
        assert not any(
            line.lstrip().startswith(("job accepted", "| tool_choice_rate | pass")) for line in text.splitlines()
        ), name
    assert "<script" not in texts["report.html"] and "onerror" not in texts["report.html"].lower()
    assert "&lt;script&gt;" in texts["report.html"]
    assert "<script>" not in texts["summary.md"]


def test_refold_reproduces_every_row_and_the_digest(runs: dict[str, Outcome]) -> None:
    """`gate refold` re-folds each run's stored records to the card's rows (and the records to its digest)."""
    for patch, outcome in runs.items():
        done = _gate("refold", str(outcome.card_path))
        assert done.returncode == RET_OK, (patch, done.stdout, done.stderr)
        lines = done.stdout.splitlines()
        assert len(lines) == 5 and all(": agrees (" in line for line in lines), lines


def test_gate_diff_of_the_good_and_a_bad_card_names_what_changed(runs: dict[str, Outcome]) -> None:
    """`gate diff` of the good card and the wrong_tool card exits 1 and names the tree, status and the
    statistical row's kind, hits and rate; as JSON, the same."""
    good, wrong = runs["good"].card_path, runs["wrong_tool"].card_path
    done = _gate("diff", str(good), str(wrong))
    assert done.returncode == RET_BLOCKED, done.stderr
    assert "tree_digest: " in done.stdout and "status: accepted -> inconclusive" in done.stdout, done.stdout
    block = done.stdout.split(f"property {STAT}:\n", 1)[1]
    assert "  kind: pass -> inconclusive_sample" in block and "  hits: " in block and "  hit_rate: " in block
    as_json = json.loads(_gate("diff", "--json", str(good), str(wrong)).stdout)
    row = next(p for p in as_json["properties"] if p["id"] == STAT)
    assert {"field": "kind", "a": "pass", "b": "inconclusive_sample"} in row["changes"]


def test_a_browser_sees_the_failing_rate_its_trials_and_nothing_run(runs: dict[str, Outcome], chromium: Any) -> None:
    """Headless Chromium shows the wrong_tool report's status, its rate dot at 0 on the axis below the
    band, the open block of missed trials naming the assertion; the hostile report runs no script."""
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    chromium.get((runs["wrong_tool"].folder / "report.html").as_uri())
    status = chromium.find_element(By.CSS_SELECTOR, "h1#status")
    assert status.get_attribute("data-status") == "inconclusive" and status.is_displayed()
    row = chromium.find_element(By.CSS_SELECTOR, f"g.rate-row[data-property='{STAT}']")
    assert (row.get_attribute("data-rate"), row.get_attribute("data-threshold")) == ("0", "0.8")
    axis, dot = (row.find_element(By.CSS_SELECTOR, css).rect for css in ("line.axis", "circle.rate"))
    assert abs(dot["x"] + dot["width"] / 2 - axis["x"]) <= 2  # rate 0: the axis' left end
    block = chromium.find_element(By.CSS_SELECTOR, f"details.trials[data-property='{STAT}']")
    assert block.get_attribute("open") is not None and block.get_attribute("data-problems") == "10"
    assert re.search(r"detail: chose (resend_invoice|update_address)", block.text), block.text[:500]
    chromium.get((runs["hostile"].folder / "report.html").as_uri())
    with pytest.raises(NoAlertPresentException):
        _ = chromium.switch_to.alert
    assert chromium.find_elements(By.CSS_SELECTOR, "script, img, iframe, object") == []
    assert "<script>alert(1)</script>" in chromium.find_element(By.CSS_SELECTOR, "#trials").text
