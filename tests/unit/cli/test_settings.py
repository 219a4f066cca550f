"""The `gate` command's settings (gate.cli.settings): read once from the environment, each variable into
its field, a bad value refused in one line naming it, and listed by `gate doctor --json` without its value."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from support.paths import ROOT

from gate.cli import doctor
from gate.cli.main import main
from gate.cli.settings import DEFAULT_VISIBILITY_TIMEOUT_S, GateSettings, reference_tables
from gate.core.errors import RET_OK, RET_USAGE, UsageError
from gate.io.envsettings import default_state_dir, rows
from gate.io.hostsettings import HostSettings
from gate.io.journal import STATE_ENV
from gate.io.reports import STEP_SUMMARY_ENV
from worker.celery.shared.app import VISIBILITY_TIMEOUT_S


def test_a_bare_environment_gives_the_documented_defaults() -> None:
    """Nothing set: no registry named, the home state folder, the 600 s visibility timeout, nothing to sign."""
    settings = GateSettings.from_env({})
    assert settings == GateSettings()
    assert settings.workers == Path(".probegate/workers.json") and not settings.workers_named
    assert settings.state_dir == default_state_dir() and settings.visibility_timeout_s == 600.0
    assert (settings.sign_key, settings.accept_key, settings.broker, settings.step_summary) == (None,) * 4


def test_each_variable_lands_in_its_field() -> None:
    """Every variable the gate reads is read into its own field."""
    env = {
        "PROBEGATE_INTERPRETER": "warm",
        "PROBEGATE_REGISTRY": "127.0.0.1:5000",
        "PROBEGATE_QUEUE": "pinned",
        "PROBEGATE_WORKERS": "/r/workers.json",
        "PROBEGATE_STATE_DIR": "/s",
        "PROBEGATE_SIGN_KEY": "/k",
        "PROBEGATE_ACCEPT_KEY": "/k.pub",
        "PROBEGATE_REDIS_ADMIN": "redis://admin@h/0",
        "PROBEGATE_BROKER": "redis://b/0",
        "PROBEGATE_LEDGER": "redis://l/1",
        "PROBEGATE_VISIBILITY_TIMEOUT": "90",
        "GITHUB_STEP_SUMMARY": "/step.md",
        "PROBEGATE_REQUIRE_SIGNED": "1",
        "PROBEGATE_WORK_COPY": "copy",
        "PROBEGATE_POOL": "off",
        "PROBEGATE_TREE_MOUNT": "off",
        "XDG_RUNTIME_DIR": "/run/user/0",
    }
    assert GateSettings.from_env(env) == GateSettings(
        interpreter="warm",
        registry="127.0.0.1:5000",
        queue="pinned",
        workers=Path("/r/workers.json"),
        workers_named=True,
        state_dir=Path("/s"),
        sign_key=Path("/k"),
        accept_key=Path("/k.pub"),
        redis_admin="redis://admin@h/0",
        broker="redis://b/0",
        ledger="redis://l/1",
        visibility_timeout_s=90.0,
        step_summary=Path("/step.md"),
        require_signed=True,
        host=HostSettings(work_copy="copy", pool="off", tree_mount=False, runtime_dir=Path("/run/user/0")),
    )
    assert {row["variable"] for row in rows(GateSettings)} == set(env)


def test_the_state_folder_follows_xdg_unless_named() -> None:
    """$XDG_STATE_HOME/probegate without PROBEGATE_STATE_DIR; the named folder wins over it."""
    assert GateSettings.from_env({"XDG_STATE_HOME": "/x"}).state_dir == Path("/x/probegate")
    assert GateSettings.from_env({"XDG_STATE_HOME": "/x", STATE_ENV: "/s"}).state_dir == Path("/s")


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan"])
def test_a_visibility_timeout_that_is_no_positive_number_is_a_usage_error(value: str) -> None:
    """A mistyped timeout stops the command in one line naming the variable (exit 64), before anything runs."""
    with pytest.raises(UsageError) as caught:
        GateSettings.from_env({"PROBEGATE_VISIBILITY_TIMEOUT": value})
    assert caught.value.field == "PROBEGATE_VISIBILITY_TIMEOUT" and "\n" not in str(caught.value)


def test_a_bad_setting_exits_64_without_a_traceback(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Through the entry point the same mistake is one `gate: error:` line and exit 64."""
    monkeypatch.setenv("PROBEGATE_VISIBILITY_TIMEOUT", "soon")
    assert main(["schema", "card"]) == RET_USAGE
    err = capsys.readouterr().err
    assert err.startswith("gate: error: PROBEGATE_VISIBILITY_TIMEOUT: ") and len(err.strip().splitlines()) == 1


def test_names_written_out_for_cheap_parsing_match_their_modules() -> None:
    """The constants gate.cli.settings writes out (to keep parsing light) equal the ones their modules use."""
    assert DEFAULT_VISIBILITY_TIMEOUT_S == VISIBILITY_TIMEOUT_S
    names = {row["variable"] for row in rows(GateSettings)}
    assert {STATE_ENV, STEP_SUMMARY_ENV} <= names


def test_doctor_lists_every_setting_and_never_its_value(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """`gate doctor --json` lists each setting with its default and meaning and whether it is set; a password
    in a broker URL stays out of the document."""
    monkeypatch.setattr(doctor, "collect", lambda _args: [])
    settings = GateSettings.from_env({"PROBEGATE_REDIS_ADMIN": "redis://admin:hunter2@h/0"})
    assert doctor.run_doctor(argparse.Namespace(json=True, settings=settings)) == RET_OK
    text = capsys.readouterr().out
    listed = {row["variable"]: row for row in json.loads(text)["settings"]}
    assert set(listed) == {row["variable"] for row in rows(GateSettings)}
    assert listed["PROBEGATE_REDIS_ADMIN"]["set"] is True and listed["PROBEGATE_BROKER"]["set"] is False
    assert listed["PROBEGATE_VISIBILITY_TIMEOUT"]["default"] == "600.0"
    assert "hunter2" not in text


def test_the_reference_page_holds_the_tables_the_models_give() -> None:
    """docs/reference/settings.md's settings tables are the ones the models write (.ci/settings-table)."""
    page = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    assert reference_tables() in page, "stale settings tables: run .ci/settings-table"
