"""gate.core.suite.selection and `gate run -k/--property`: only the selected properties run, the card
says which, and `accept` refuses a card that covers less than the whole suite."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.mini_suite import CONTRACT, SAFETY, STAT, build_suite, good, run_request

from gate.cli.main import main
from gate.core.errors import RET_USAGE, UsageError
from gate.core.suite.selection import select_ids
from gate.core.verdicts.verdict import Kind
from gate.run.executors.mock import MockExecutor

IDS = (SAFETY, CONTRACT, STAT)


def test_no_flag_selects_the_whole_suite() -> None:
    """Without --property or -k the selection is None: the whole suite."""
    assert select_ids(IDS) is None


def test_property_picks_exact_ids_in_suite_order() -> None:
    """--property picks by exact id, and the selection keeps the suite's order."""
    assert select_ids(IDS, exact=[STAT, SAFETY]) == (SAFETY, STAT)


@pytest.mark.parametrize(("keyword", "expected"), [("total", (CONTRACT,)), ("*_rate", (STAT,)), ("no_*", (SAFETY,))])
def test_k_matches_a_substring_or_a_glob(keyword: str, expected: tuple[str, ...]) -> None:
    """-k is a substring of the id, or a glob when it holds a wildcard."""
    assert select_ids(IDS, keyword=keyword) == expected


def test_property_and_k_together_select_what_either_picks() -> None:
    """A property is selected when --property or -k picks it."""
    assert select_ids(IDS, exact=[SAFETY], keyword="rate") == (SAFETY, STAT)


def test_selecting_every_property_is_the_whole_suite() -> None:
    """A selection that picks every property is recorded as the whole suite (None)."""
    assert select_ids(IDS, keyword="_") is None


def test_an_unknown_property_is_a_one_line_usage_error_naming_it() -> None:
    """--property with an id the suite lacks is a usage error (exit 64) naming the id on one line."""
    with pytest.raises(UsageError) as caught:
        select_ids(IDS, exact=[SAFETY, "no\nsuch"])
    assert caught.value.exit_code == RET_USAGE
    assert str(caught.value) == "--property: the suite has no property no\\nsuch"


def test_a_k_that_matches_nothing_is_a_usage_error() -> None:
    """-k matching no id is a usage error rather than an empty run."""
    with pytest.raises(UsageError, match="no property id matches 'zzz'"):
        select_ids(IDS, keyword="zzz")


def test_only_the_selected_properties_are_planned_run_and_carded(tmp_path: Path) -> None:
    """A run with --property runs only that property's trials, records the selection, and says accept
    will refuse the card even though every selected row passed."""
    suite = build_suite(tmp_path)
    executor = MockExecutor(good)
    lines: list[str] = []
    request = replace(suite.request, properties=(STAT,))
    result = run_request(request, executor, lines.append)
    card = result.card
    assert [(row.id, row.kind) for row in card.properties] == [(STAT, Kind.PASS)]
    assert card.selection == (STAT,)
    assert ("run", "10") in executor.calls
    job = json.loads(lines[-1])
    assert job["accepted"] is False
    assert job["accept_reasons"][0] == (
        f"the card covers a selection of the suite's properties ({STAT}); run the whole suite to merge"
    )


def test_an_unknown_property_stops_the_run_before_the_executor_opens(tmp_path: Path) -> None:
    """--property naming no property of the suite refuses before any trial, and no card is written."""
    suite = build_suite(tmp_path)
    executor = MockExecutor(good)
    request = replace(suite.request, properties=("nope",))
    with pytest.raises(UsageError, match="no property nope"):
        run_request(request, executor, lambda _: None)
    assert executor.calls == []
    assert not suite.card.exists()


def test_gate_run_with_an_unknown_property_exits_64_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gate run --property nope` exits 64 with one error line naming the id."""
    monkeypatch.setattr("gate.cli.logs.configure", lambda level: None)  # keep structlog off the captured stderr
    suite = build_suite(tmp_path)
    request = suite.request
    argv = ["run", "--suite", str(request.suite), "--workdir", str(request.workdir), "--seal", str(request.seal)]
    argv += ["--card", str(suite.card), "--new-ledger", "--property", STAT, "--property", "nope"]
    assert main(argv) == RET_USAGE
    err = [line for line in capsys.readouterr().err.splitlines() if "nope" in line]
    assert len(err) == 1 and "--property: the suite has no property nope" in err[0]
    assert not suite.card.exists()


def test_run_takes_k_and_repeated_property_and_baseline_takes_neither() -> None:
    """`gate run` parses -k and repeated --property; `gate baseline` refuses them (a partial calibration)."""
    from gate.cli.arguments import build_parser

    args = build_parser().parse_args(["run", "-k", "rate", "--property", SAFETY, "--property", STAT])
    assert (args.keyword, args.property) == ("rate", [SAFETY, STAT])
    with pytest.raises((SystemExit, UsageError)):
        build_parser().parse_args(["baseline", "--calibration", "c.json", "-k", "rate"])
