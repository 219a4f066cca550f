"""Issue 26, hangs: command-line values that ran for minutes or exhausted memory are refused at once,
as one line with exit 64 (a FIFO named as a key or registry is tests/unit/cli/test_hostile_paths_cli.py)."""

from __future__ import annotations

import time

import pytest

from gate.cli.main import main
from gate.cli.power import MAX_RATES, parse_rates
from gate.core.errors import RET_USAGE, UsageError
from gate.core.suite.selection import MAX_KEYWORD, select_ids


def test_a_keyword_of_50000_brackets_is_refused_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(UsageError, match="-k") as info:
        select_ids(["a", "b"], keyword="[" * 50_000)
    assert time.monotonic() - started < 1.0
    assert len(str(info.value)) < 200


def test_a_keyword_at_the_bound_still_matches_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(UsageError, match="no property id matches"):
        select_ids(["a", "b"], keyword="[" * MAX_KEYWORD)
    assert select_ids(["abc", "b"], keyword="a*") == ("abc",)
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("rates", ["0:1:1e-12", "0:1:5e-324", "0:1:nan", "0:inf:0.1", ",".join(["0.5"] * 2000)])
def test_power_rates_that_would_exhaust_memory_are_refused(rates: str, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main(["power", "--rates", rates]) == RET_USAGE
    err = capsys.readouterr().err
    assert time.monotonic() - started < 5.0
    assert len(err.splitlines()) == 1 and "--rates" in err and len(err) < 300, err


def test_the_largest_range_is_kept() -> None:
    assert len(parse_rates("0:1:0.001")) == MAX_RATES
