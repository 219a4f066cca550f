"""`gate view` as headless Chromium shows it: a real `gate view` process on a free 127.0.0.1 port over two
cards made by mock runs (the second fails a contract row on hostile output) and a run in progress whose
journal and progress file the test appends to while its page is open. Screenshots of each page go to
$PROBEGATE_ARTIFACTS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.browser import BOTH_BROWSERS_PROPERTIES, CHECKS_PY, HOSTILE, SHOWN, by_css, screenshot, wait_for

from gate.core.suite.journal import JournalHeader, trial_line
from gate.core.suite.trial import Captured, Observation, TrialSpec
from gate.core.testing import make_spec
from gate.core.verdicts.bands import SprtRule
from gate.core.verdicts.verdict import OutcomeKind
from gate.io.fixtures import seal_tree, write_seal_file
from gate.io.journal import JournalWriter, journal_path, new_journal
from gate.io.liveprogress import ProgressFile, progress_path
from gate.run.executors.mock import MockExecutor
from gate.run.request import RunRequest
from gate.run.runner import run_gate

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("view_browser")]

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
LIVE_RUN = "run-live-0001"
SPRT = SprtRule(p0=0.8, p1=0.6, max_trials=40, wave=5)  # a live property's rule, as the run's suite gives it

GATE_TOML = """\
[suite]
name = "viewed"
probe = "python3 probe.py"
fixtures = "fixtures"
checks = "checks.py"
"""
GATE_TOML += BOTH_BROWSERS_PROPERTIES


def answering(echo: str, hits: int) -> Any:
    """The mock probe: `hits` of 10 right tools, and `echo` echoed."""

    def answer(spec: TrialSpec, fixture: bytes) -> Observation:
        if spec.property_id == "fixed_rate":
            payload = {"tool": "lookup" if spec.trial_index < hits else "delete"}
        else:
            payload = {"echo": echo}
        data = json.dumps(payload).encode()
        return Observation.of(
            spec, exit_code=0, image_id="sha256:mock", duration_s=0.2, stdout=Captured(data=data, length=len(data))
        )

    return answer


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, JournalWriter]]:
    """Two cards (run A passes; run B fails the contract row on hostile output) and a live run's journal."""
    root = tmp_path_factory.mktemp("view")
    (root / "gate.toml").write_text(GATE_TOML)
    (root / "checks.py").write_text(CHECKS_PY)
    fixtures = root / "fixtures"
    fixtures.mkdir()
    (fixtures / "clock.json").write_text(json.dumps({"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}))
    (fixtures / "input.json").write_text("{}")
    write_seal_file(root / "fixtures.seal", seal_tree(fixtures))
    work = root / "work"
    work.mkdir()
    (work / "probe.py").write_text("print('{}')\n")
    for name, answer, day in (("a", answering("fine", 9), 1), ("b", answering(HOSTILE, 9), 2)):
        request = RunRequest(
            suite=root / "gate.toml",
            workdir=work,
            fixture=None,
            seal=root / "fixtures.seal",
            card=root / "cards" / name / "card.json",
            new_ledger=True,
            state_dir=root / "state",
        )
        when = NOW.replace(day=day)
        run_gate(
            request,
            executor_factory=lambda _, a=answer: MockExecutor(a),
            now=lambda w=when: w,
            run_id=f"run-{name}",
            emit=lambda _: None,
        )
    header = JournalHeader(
        run_id=LIVE_RUN, suite="s", checks="", tree="t", seal="a" * 64, image="i", image_id="sha256:i",
        properties=("fixed_rate", "hostile_echo", "sprt_rate"),
    )  # fmt: skip
    writer = new_journal(journal_path(root / "cards" / "c" / "card.json", root / "state"), header)
    append(writer, 0)
    try:
        yield root, writer
    finally:
        writer.close()


def append(writer: JournalWriter, index: int) -> None:
    spec = make_spec(run_id=LIVE_RUN, property_id="fixed_rate", trial_index=index)
    writer.append(trial_line(writer.chain, spec, Observation.of(spec, exit_code=0, duration_s=0.1)))
    writer.sync()


def start_view(root: Path, *flags: str) -> tuple[subprocess.Popen[str], str]:
    """A real `gate view` on a free port; its address from the line it prints first."""
    gate = Path(sys.executable).with_name("gate")
    env = {**os.environ, "PROBEGATE_STATE_DIR": str(root / "state")}
    argv = [str(gate), "view", "--cards", str(root / "cards"), "--port", "0", *flags]
    process = subprocess.Popen(argv, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("gate view: http://"):
        process.kill()
        pytest.fail(f"gate view did not start: {line!r} {process.communicate(timeout=10)[1]}")
    return process, line.removeprefix("gate view: ").strip()


@pytest.fixture(scope="module")
def view(site: tuple[Path, JournalWriter]) -> Iterator[str]:
    process, url = start_view(site[0])
    try:
        yield url.rstrip("/")
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_runs_page_lists_both_cards_and_the_live_run(chromium: Any, view: str, tmp_path: Path) -> None:
    chromium.get(view + "/")
    rows = by_css(chromium, "#runs tr.run")
    assert [row.get_attribute("data-run") for row in rows] == ["run-b", "run-a"]
    assert [row.get_attribute("data-status") for row in rows] == ["blocked", "accepted"]
    assert len(by_css(chromium, "#live-runs li.live-run")) == 1
    screenshot(chromium, "view-runs", tmp_path)


def test_a_live_runs_rows_update_without_a_reload(
    chromium: Any, view: str, site: tuple[Path, JournalWriter], tmp_path: Path
) -> None:
    chromium.get(view + "/")
    by_css(chromium, "#live-runs a")[0].click()
    cell = wait_for(chromium, lambda b: by_css(b, "#live tr[data-property='fixed_rate'] td[data-field='trials']"))[0]
    assert cell.text == "1"
    chromium.execute_script("window.notReloaded = true;")
    for index in (1, 2, 3):
        append(site[1], index)
    wait_for(chromium, lambda b: cell.text == "4")
    assert chromium.execute_script("return window.notReloaded === true;")
    assert by_css(chromium, "#live-total")[0].text == "4"
    screenshot(chromium, "view-live", tmp_path)


# Read in one script: the page replaces the plot whenever the stream sends it, so a handle on one of its
# elements can go stale between two calls.
SPRT_STATE = """
const group = document.querySelector("#live-paths svg#sprt-2 g.sprt-path");
if (!group) return null;
const end = group.querySelector("circle.llr-end").getBoundingClientRect();
const reject = group.querySelector("line.boundary.reject").getBoundingClientRect();
return {points: group.querySelector("polyline.llr").points.numberOfItems, trials: group.dataset.trials,
        decision: group.dataset.decision, endY: end.y + end.height / 2, rejectY: reject.y};
"""


def sprt_state(browser: Any) -> dict[str, Any]:
    """The live page's SPRT path now: its points, trials and decision, and where its end and line A are drawn."""
    return browser.execute_script(SPRT_STATE) or {"points": 0}


def test_a_live_runs_sprt_path_grows_without_a_reload(
    chromium: Any, view: str, site: tuple[Path, JournalWriter], tmp_path: Path
) -> None:
    """The run's checks judge the SPRT property's first trials: its path is drawn; the next wave's outcomes
    reach the open page, which redraws the path one point per judged trial, now past line A, without a reload."""
    progress = ProgressFile(progress_path(site[1].path), sprt={"sprt_rate": SPRT}, every_s=0)
    progress.planned("sprt_rate", 5)
    for index, kind in enumerate((OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.MISS)):
        progress.done("sprt_rate", kind, index)
    chromium.get(view + "/")
    by_css(chromium, "#live-runs a")[0].click()
    first = wait_for(chromium, lambda b: (state := sprt_state(b))["points"] == 3 and state)
    assert (first["trials"], first["decision"]) == ("3", "open") and first["endY"] > first["rejectY"]
    chromium.execute_script("window.notReloaded = true;")
    progress.planned("sprt_rate", 10)
    for index in range(3, 8):
        progress.done("sprt_rate", OutcomeKind.MISS, index)
    grown = wait_for(chromium, lambda b: (state := sprt_state(b))["points"] == 8 and state)
    assert chromium.execute_script("return window.notReloaded === true;")
    assert (grown["trials"], grown["decision"]) == ("8", "below")
    assert grown["endY"] <= grown["rejectY"] + 1.5  # drawn on or above line A
    screenshot(chromium, "view-live-sprt", tmp_path)


def test_compare_shows_the_row_that_changed_kind(chromium: Any, view: str, tmp_path: Path) -> None:
    chromium.get(view + "/")
    by_css(chromium, "tr[data-run='run-a'] input[name='a']")[0].click()
    by_css(chromium, "tr[data-run='run-b'] input[name='b']")[0].click()
    by_css(chromium, "form[action='/compare'] button[type='submit']")[0].click()
    wait_for(chromium, lambda b: by_css(b, "#changes"))
    changed = by_css(chromium, "#changes tr.changed-kind")
    assert [row.get_attribute("data-property") for row in changed] == ["hostile_echo"]
    assert "pass" in changed[0].text and "fail_contract" in changed[0].text
    assert len(by_css(chromium, "#compare-rates g.compare-row")) == 2
    screenshot(chromium, "view-compare", tmp_path)


def test_a_hostile_detail_renders_as_text(chromium: Any, view: str, tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    chromium.get(view + "/")
    by_css(chromium, "tr[data-run='run-b'] a")[0].click()
    wait_for(chromium, lambda b: by_css(b, "#properties"))
    with pytest.raises(NoAlertPresentException):
        _ = chromium.switch_to.alert
    assert by_css(chromium, "script") == [] and by_css(chromium, "img") == []
    handlers = chromium.execute_script(
        "return [...document.querySelectorAll('*')].flatMap(e => [...e.getAttributeNames()])"
        ".filter(n => n.toLowerCase().startsWith('on'))"
    )
    assert handlers == []
    row = by_css(chromium, "#properties tr[data-kind='fail_contract']")[0]
    detail = by_css(row, "td.detail")[0].text
    for shown in SHOWN:
        assert shown in detail, shown
    screenshot(chromium, "view-run", tmp_path)


@pytest.mark.parametrize(("path", "selector"), [("/property?id=fixed_rate", "#history"), ("/flakes", "#freezes"),
                                                ("/fleet", "#workers")])  # fmt: skip
def test_the_other_pages_render(chromium: Any, view: str, path: str, selector: str, tmp_path: Path) -> None:
    chromium.get(view + path)
    assert len(by_css(chromium, selector)) == 1
    screenshot(chromium, "view-" + path.strip("/").split("?")[0], tmp_path)


def test_a_non_loopback_bind_refuses_a_request_without_the_token(
    chromium: Any, site: tuple[Path, JournalWriter]
) -> None:
    process, url = start_view(site[0], "--host", "0.0.0.0")
    try:
        port = url.split(":")[2].split("/")[0]
        token = url.split("token=", 1)[1]
        bare = f"http://127.0.0.1:{port}/"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bare, timeout=10)
        assert refused.value.code == 403
        chromium.get(bare)
        assert "refused" in chromium.find_element("tag name", "body").text
        chromium.get(f"{bare}?token={token}")
        assert len(by_css(chromium, "#runs tr.run")) >= 2
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_card_replaces_the_live_page_once_written(
    chromium: Any, view: str, site: tuple[Path, JournalWriter]
) -> None:
    """The run commits and writes its card (here, a copy of run A's under the live run's id): the page follows."""
    root, writer = site
    chromium.get(view + "/")
    by_css(chromium, "#live-runs a")[0].click()
    wait_for(chromium, lambda b: by_css(b, "#live"))
    writer.commit()
    card = json.loads((root / "cards" / "a" / "card.json").read_text())
    (root / "cards" / "c").mkdir(exist_ok=True)
    (root / "cards" / "c" / "card.json").write_text(json.dumps({**card, "run_id": LIVE_RUN}))
    wait_for(chromium, lambda b: "/run/" in b.current_url)
    assert by_css(chromium, "h1#status")[0].get_attribute("data-status") == "accepted"
