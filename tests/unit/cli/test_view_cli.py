"""`gate view`'s command line: a bad flag is one error line and exit 64, before anything listens; the
sources it composes from the flags, the suite and the settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.cli.arguments import build_parser
from gate.cli.main import main
from gate.cli.settings import GateSettings
from gate.cli.view import sources_of
from gate.core.errors import RET_USAGE, UsageError


@pytest.mark.parametrize(
    "argv",
    [
        ["view", "--port", "x"],
        ["view", "--port", "70000"],
        ["view", "--cards", "/nonexistent/cards"],
        ["view", "--cards", ".", "--books", "ftp://host/books"],
        ["view", "--cards", ".", "--host", "256.0.0.1"],
    ],
)
def test_a_bad_flag_is_one_line_and_exit_64(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == RET_USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("gate: error:"), err


def test_without_cards_or_a_suite_naming_one_it_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["view"]) == RET_USAGE
    assert "--cards" in capsys.readouterr().err


def test_the_sources_come_from_the_flags_and_the_state_folder(tmp_path: Path) -> None:
    (tmp_path / "cards").mkdir()
    args = build_parser().parse_args(["view", "--cards", str(tmp_path / "cards")])
    args.settings = GateSettings(state_dir=tmp_path / "state")
    sources = sources_of(args)
    assert sources.card_dirs == ((tmp_path / "cards").resolve(),)
    assert sources.journal_dir == tmp_path / "state" / "journals"
    assert sources.history is None and sources.freezes is None  # no ledger by the cards, no suite
    assert sources.fleet is not None and sources.fleet(None) == []  # no registry file: nobody enrolled


def test_a_broker_that_is_no_redis_url_is_refused(tmp_path: Path) -> None:
    """--broker must be redis:// or rediss://: anything else is a usage error naming the flag."""
    args = build_parser().parse_args(["view", "--cards", str(tmp_path), "--broker", "http://x"])
    args.settings = GateSettings()
    with pytest.raises(UsageError) as caught:
        sources_of(args)
    assert caught.value.field == "--broker"
