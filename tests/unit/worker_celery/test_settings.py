"""A worker's settings (worker.celery.worker.settings): read from the environment in one place, with the
defaults a bare `gate-worker serve` gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.core.errors import RET_USAGE
from gate.io.envsettings import rows
from worker.celery.worker.cli import main as worker_main
from worker.celery.worker.settings import DEFAULT_BROKER, PoolSettings, WorkerSettings


def test_a_bare_environment_gives_the_documented_defaults() -> None:
    """Nothing set: the local broker, the Docker sandbox, no registry, the key and cache under home."""
    settings = PoolSettings.from_env({})
    assert (settings.broker, settings.sandbox, settings.registry, settings.blobs) == (
        DEFAULT_BROKER,
        "docker",
        None,
        None,
    )
    assert settings.key.name == "worker.key" and settings.cache.name == "probegate" and not settings.stub_sandbox


def test_each_variable_lands_in_its_field() -> None:
    """Every PROBEGATE_* variable the pool processes inherit is read into its field."""
    env = {
        "PROBEGATE_BROKER": "redis://b/1",
        "PROBEGATE_BLOBS": "redis://blobs/2",
        "PROBEGATE_SANDBOX": "stub",
        "PROBEGATE_IMAGE": "img",
        "PROBEGATE_CACHE": "/c",
        "PROBEGATE_REGISTRY": "127.0.0.1:5000",
        "PROBEGATE_WORKER_ID": "w1",
        "PROBEGATE_WORKER_KEY": "/k",
        "PROBEGATE_RUN_IDLE_S": "5",
    }
    settings = PoolSettings.from_env(env)
    assert settings == PoolSettings(
        broker="redis://b/1",
        blobs="redis://blobs/2",
        sandbox="stub",
        image="img",
        cache=Path("/c"),
        registry="127.0.0.1:5000",
        worker_id="w1",
        key=Path("/k"),
        run_idle="5",
    )
    assert settings.stub_sandbox


def test_the_worker_reads_its_pool_settings_from_the_same_environment() -> None:
    """`gate-worker`'s settings hold the pool processes' part, read from the same variables; each is listed once."""
    env = {"PROBEGATE_BROKER": "redis://b/1", "PROBEGATE_BROKER_FILE": "/f.json", "PROBEGATE_VISIBILITY_TIMEOUT": "30"}
    settings = WorkerSettings.from_env(env)
    assert (settings.broker, settings.broker_file) == ("redis://b/1", Path("/f.json"))
    assert (settings.pool.broker, settings.pool.visibility_timeout_s) == ("redis://b/1", 30.0)
    assert WorkerSettings.from_env({}).broker is None  # serve then needs --broker or a broker file
    variables = [row["variable"] for row in rows(WorkerSettings)]
    assert len(variables) == len(set(variables)) and set(env) <= set(variables)


def test_a_bad_setting_stops_the_worker_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A visibility timeout that is no number is one `gate-worker: error:` line naming it, exit 64."""
    monkeypatch.setenv("PROBEGATE_VISIBILITY_TIMEOUT", "soon")
    assert worker_main(["key", "--key", "/nonexistent/k"]) == RET_USAGE
    err = capsys.readouterr().err
    assert "PROBEGATE_VISIBILITY_TIMEOUT" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
