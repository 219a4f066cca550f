"""gate.cli.summary.print_summary: the rich table after a run, plain off a terminal, and a detail from the
patch's output always printed literally (escaped, never read as markup); cards from run_gate over a MockExecutor."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from support.mini_suite import CONTRACT, SAFETY, STAT, build_suite, but, run, stdout

from gate.cli.summary import print_summary
from gate.core.card.card import VerdictCard
from gate.core.suite.trial import FaultOrigin, Observation

HOSTILE_TOTAL = "[red]x[/red] \x1b[2J\nend"
SGR = re.compile(r"\x1b\[[0-9;]*m")


def hostile_card(tmp_path: Path) -> VerdictCard:
    """A card whose contract row's detail quotes a total holding markup, a clear-screen escape and a newline."""
    answer = but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({"total": HOSTILE_TOTAL})))
    result, _ = run(build_suite(tmp_path), answer)
    return result.card


def summary(card: VerdictCard, *, terminal: bool | None = None) -> str:
    out = io.StringIO()
    print_summary(card, file=out, terminal=terminal)
    return out.getvalue()


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wide console, so that no cell is folded across lines and substrings can be looked for whole."""
    monkeypatch.setenv("COLUMNS", "250")


def test_off_a_terminal_the_summary_has_no_escape_sequences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream that is not a terminal gets plain text without one ESC, even with FORCE_COLOR set."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    text = summary(hostile_card(tmp_path))
    assert "\x1b" not in text
    assert "job: blocked (exit 1)" in text


def test_hostile_detail_prints_literally_off_a_terminal(tmp_path: Path) -> None:
    """Markup, an ANSI escape and a newline in a detail print escaped and literal, on the row's one line."""
    text = summary(hostile_card(tmp_path))
    literal = r"[red]x[/red] \x1b[2J\nend"
    row = next(line for line in text.splitlines() if line.startswith(CONTRACT))
    assert literal in row
    assert "fail_contract" in row and "0/1" in row
    assert f"  - {CONTRACT}: fail_contract (trial 0: total {literal} != 12.10)" in text


def test_hostile_detail_prints_literally_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal the summary is coloured, but the detail's markup is not applied and its ESC is escaped."""
    text = summary(hostile_card(tmp_path), terminal=True)
    assert "\x1b[2J" not in text
    assert SGR.search(text)  # coloured: it is a terminal
    plain = SGR.sub("", text)
    assert "\x1b" not in plain  # only colour codes, nothing the patch chose
    assert r"[red]x[/red] \x1b[2J\nend" in plain


def test_summary_keeps_what_it_showed(tmp_path: Path) -> None:
    """The run line, every property's id, band, kind and hits/trials, why a row does not vote, the job status
    and its reasons are all in the summary."""
    faulty = but(
        CONTRACT, lambda spec, _: Observation.harness_fault(spec, "container vanished", origin=FaultOrigin.HARNESS)
    )
    result, _ = run(build_suite(tmp_path), faulty)
    card = result.card
    text = summary(card)
    assert text.startswith(f"probegate {card.gate_version}  run {card.run_id[:12]}  seal {card.fixture.seal[:16]}")
    rows = {
        line.split()[0]: line.split()
        for line in text.splitlines()
        if line.split()[:1] in ([SAFETY], [CONTRACT], [STAT])
    }
    assert rows[SAFETY][1:4] == ["safety", "pass", "1/1"]
    assert rows[CONTRACT][1:4] == ["contract", "harness_error", "0/1"]
    assert rows[STAT][1:4] == ["statistical", "pass", "10/10"]
    contract_line = " ".join(rows[CONTRACT])
    assert f"(not voting: {card.properties[1].ledger})" in contract_line and "container vanished" in contract_line
    assert f"job: {card.status} (exit {card.exit_code})" in text
    for reason in card.reasons:
        assert f"  - {reason}" in text
