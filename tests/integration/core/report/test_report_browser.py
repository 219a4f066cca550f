"""The HTML report as headless Chromium shows it: a card and its records made by a mock run, rendered by
the real `gate report --report-html`, then read back from the live DOM and its rendered geometry.
No Docker: the trials are answered in-process."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.browser import BOTH_BROWSERS_PROPERTIES, CHECKS_PY, HOSTILE, SHOWN, by_css, one, screenshot

from gate.core.report.html_dom import CSP
from gate.core.suite.trial import Captured, FileChange, Observation, TrialSpec
from gate.io.artifacts import read_card, write_card
from gate.io.fixtures import seal_tree, write_seal_file
from gate.run.executors.mock import MockExecutor
from gate.run.request import RunRequest
from gate.run.runner import run_gate

# One worker takes the whole module (--dist loadgroup): the module's `report` and headless `browser` are made once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("report_browser")]

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
PX = 1.5  # rendered positions agree with the data to within this many CSS pixels

GATE_TOML = """\
[suite]
name = "browser"
probe = "python3 probe.py"
fixtures = "fixtures"
checks = "checks.py"

[[property]]
id = "no_unmapped_write"
band = "safety"
fixture = "input.json"
check = "builtin:no_unmapped_write"
deadline_s = 1.0
params = { write_map = ["out/*"] }

[[property]]
id = "sprt_rate"
band = "statistical"
fixture = "input.json"
check = "checks:right_tool"
deadline_s = 1.0
rule = "sprt"
p0 = 0.8
p1 = 0.6
max_trials = 60
wave = 5
"""
GATE_TOML += BOTH_BROWSERS_PROPERTIES

SPRT_HITS = {0, 3}  # then misses only: open after the first wave, below the band after the second
FIXED_HITS = 7  # of 10, band 8: inconclusive_sample


def answer(spec: TrialSpec, fixture: bytes) -> Observation:
    """The mock probe: a mapped write; an SPRT property that misses most trials; a fixed one at 7 of 10;
    a contract property echoing hostile text; durations that grow with the trial index."""
    i = spec.trial_index
    payload: dict[str, str] = {}
    writes: tuple[FileChange, ...] = ()
    if spec.property_id == "no_unmapped_write":
        writes = (FileChange(path="/work/out/result.json", change="created"),)
    elif spec.property_id == "sprt_rate":
        payload = {"tool": "lookup" if i in SPRT_HITS else "delete"}
    elif spec.property_id == "fixed_rate":
        payload = {"tool": "lookup" if i < FIXED_HITS else "delete"}
    else:
        payload = {"echo": HOSTILE}
    data = json.dumps(payload).encode()
    return Observation.of(
        spec,
        exit_code=0,
        image_id="sha256:mock",
        duration_s=0.15 + 0.1 * i,  # trial 9 runs past the 1 s deadline
        stdout=Captured(data=data, length=len(data)),
        writes=writes,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run the suite over the mock, give the contract row a hostile id (as a hand-edited card could; the
    suite's id pattern refuses one), then write the page with `gate report CARD --report-html`."""
    root = tmp_path_factory.mktemp("browser")
    (root / "gate.toml").write_text(GATE_TOML)
    (root / "checks.py").write_text(CHECKS_PY)
    fixtures = root / "fixtures"
    fixtures.mkdir()
    (fixtures / "clock.json").write_text(json.dumps({"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}))
    (fixtures / "input.json").write_text("{}")
    seal = root / "fixtures.seal"
    write_seal_file(seal, seal_tree(fixtures))
    work = root / "work"
    work.mkdir()
    (work / "probe.py").write_text("print('{}')\n")
    card_path = root / "out" / "card.json"
    request = RunRequest(
        suite=root / "gate.toml",
        workdir=work,
        fixture=None,
        seal=seal,
        card=card_path,
        new_ledger=True,
        state_dir=root / "state",
    )
    run_gate(
        request,
        executor_factory=lambda _: MockExecutor(answer),
        now=lambda: NOW,
        run_id="run-browser-0001",
        emit=lambda _: None,
    )
    card = read_card(card_path)
    rows = tuple(
        row.model_copy(update={"id": f"hostile_echo {HOSTILE}"}) if row.id == "hostile_echo" else row
        for row in card.properties
    )
    write_card(card_path, card.model_copy(update={"properties": rows}))
    page = root / "report.html"
    gate = Path(sys.executable).with_name("gate")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}  # not CI's step summary
    argv = [str(gate), "report", str(card_path), "--report-html", str(page)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return page


@pytest.fixture(scope="module")
def browser(chromium: Any, report: Path) -> Any:
    """The page loaded in headless Chromium."""
    chromium.get(report.as_uri())
    return chromium


def centre_x(element: Any) -> float:
    rect = element.rect
    return rect["x"] + rect["width"] / 2


def test_status_heading_shows_the_blocked_job(browser: Any, report: Path) -> None:
    """`h1#status` reads the card's status and exit code, in its text and its data attributes."""
    card = read_card(report.parent / "out" / "card.json")
    assert (card.status, card.exit_code) == ("blocked", 1)
    heading = one(browser, "h1#status")
    assert heading.text == "probegate: job blocked (exit 1)"
    assert (heading.get_attribute("data-status"), heading.get_attribute("data-exit-code")) == ("blocked", "1")


def test_each_rate_marker_sits_where_its_rate_is_on_the_axis(browser: Any) -> None:
    """Per rate row, the dot's rendered x is the axis' left end plus rate times its rendered width; so are the
    interval's ends and a fixed rule's threshold."""
    rows = {row.get_attribute("data-property"): row for row in by_css(browser, "g.rate-row")}
    assert set(rows) == {"sprt_rate", "fixed_rate"}
    assert rows["fixed_rate"].get_attribute("data-rate") == "0.7"
    assert rows["sprt_rate"].get_attribute("data-rate") == "0.2"
    for row in rows.values():
        axis = one(row, "line.axis").rect
        assert axis["width"] > 200

        def at(value: str | None, axis: dict = axis) -> float:
            return axis["x"] + float(value or "nan") * axis["width"]

        assert centre_x(one(row, "circle.rate")) == pytest.approx(at(row.get_attribute("data-rate")), abs=PX)
        interval = one(row, "line.interval").rect
        assert interval["x"] == pytest.approx(at(row.get_attribute("data-lower")), abs=PX)
        assert interval["x"] + interval["width"] == pytest.approx(at(row.get_attribute("data-upper")), abs=PX)
    threshold = one(rows["fixed_rate"], "line.threshold")
    assert rows["fixed_rate"].get_attribute("data-threshold") == "0.8"
    assert centre_x(threshold) == pytest.approx(at(rows["fixed_rate"].get_attribute("data-threshold")), abs=PX)


def test_sprt_path_has_a_point_per_trial_and_ends_past_the_reject_line(browser: Any) -> None:
    """The SPRT polyline has one point per counted trial (10: two waves) and, decided `below`, ends on or
    above line A on screen; its end dot is where the last point is drawn."""
    (group,) = by_css(browser, "g.sprt-path")
    assert group.get_attribute("data-property") == "sprt_rate"
    assert (group.get_attribute("data-trials"), group.get_attribute("data-decision")) == ("10", "below")
    assert float(group.get_attribute("data-final-llr")) >= float(group.get_attribute("data-upper"))
    polyline = one(group, "polyline.llr")
    assert polyline.is_displayed()
    count = browser.execute_script("return arguments[0].points.numberOfItems", polyline)
    assert count == 10 == len((polyline.get_attribute("points") or "").split())
    reject, accept = one(group, "line.boundary.reject"), one(group, "line.boundary.accept")
    end = one(group, "circle.llr-end")
    assert end.rect["y"] + end.rect["height"] / 2 <= reject.rect["y"] + PX < accept.rect["y"]
    # The polyline's box ends at the last trial, on the right of the plot.
    line_box = polyline.rect
    assert line_box["x"] + line_box["width"] == pytest.approx(centre_x(end), abs=PX)
    caption = one(browser, "p.sprt-caption")
    assert "2/10 hits" in caption.text and "below the band" in caption.text


def test_durations_left_and_right_of_the_deadline(browser: Any) -> None:
    """A trial past its deadline is class `over` and drawn right of the deadline line; the others left of it."""
    rows = by_css(browser, "g.duration-row")
    assert len(rows) == 4
    overs = 0
    for row in rows:
        deadline = float(row.get_attribute("data-deadline"))
        line_x = centre_x(one(row, "line.deadline"))
        dots = by_css(row, "circle.duration")
        assert len(dots) == int(row.get_attribute("data-trials"))
        for dot in dots:
            seconds = float(dot.get_attribute("data-seconds"))
            over = "over" in (dot.get_attribute("class") or "").split()
            assert over == (seconds > deadline)
            assert (centre_x(dot) > line_x) if over else (centre_x(dot) <= line_x + PX)
            overs += over
    assert overs > 0


def test_hostile_text_is_shown_as_text_and_runs_nothing(browser: Any) -> None:
    """No alert fired, no script or img element exists, no on* attribute; the hostile id and detail are text;
    the CSP meta is in place."""
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        _ = browser.switch_to.alert
    assert by_css(browser, "script") == [] and by_css(browser, "img") == []
    handlers = browser.execute_script(
        "return [...document.querySelectorAll('*')].flatMap(e => [...e.getAttributeNames()])"
        ".filter(n => n.toLowerCase().startsWith('on'))"
    )
    assert handlers == []
    row = next(r for r in by_css(browser, "#properties tbody tr") if r.get_attribute("data-kind") == "fail_contract")
    cells = by_css(row, "td")
    for shown in SHOWN:
        assert shown in cells[0].text, shown  # the id
        assert shown in cells[-1].text, shown  # the detail quoting the probe's output
    meta = one(browser, "meta[http-equiv='Content-Security-Policy']")
    assert meta.get_attribute("content") == CSP


def test_trials_to_look_at_open_where_trials_missed(browser: Any) -> None:
    """The reviewers' blocks: a property whose trials missed is open and shows the check's message (the
    hostile one as text); one whose trials all passed is closed, its sample hidden until opened."""
    blocks = {b.get_attribute("data-property"): b for b in by_css(browser, "details.trials")}
    fixed = blocks["fixed_rate"]
    assert fixed.get_attribute("open") is not None and fixed.get_attribute("data-problems") == "3"
    shown = [line.text for line in by_css(fixed, "div.line") if line.is_displayed()]
    assert any("detail: chose delete" in line for line in shown), shown
    hostile = next(b for pid, b in blocks.items() if pid.startswith("hostile_echo"))
    assert all(part in hostile.text for part in SHOWN)
    # The card's row was renamed away from its records (as a hand edit could): the page names them.
    assert "hostile_echo" in one(browser, "p.unbound").text
    passing = blocks["no_unmapped_write"]
    assert passing.get_attribute("open") is None and passing.get_attribute("data-problems") == "0"
    assert not any(line.is_displayed() for line in by_css(passing, "div.line"))


def test_full_page_screenshot(browser: Any, tmp_path: Path) -> None:
    """A full-page PNG of the report, kept in $PROBEGATE_ARTIFACTS (CI) or the test's tmp_path."""
    png = screenshot(browser, "report", tmp_path)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 600 and height > 900  # the whole page, taller than the 900-pixel window
    assert len(png) > 20_000
