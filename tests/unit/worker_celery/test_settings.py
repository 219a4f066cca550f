"""A worker's settings (worker.celery.worker.settings): read from the environment in one place, with the
defaults a bare `gate-worker serve` gets."""

from __future__ import annotations

import re
from pathlib import Path

from support.paths import ROOT

from worker.celery.worker.settings import DEFAULT_BROKER, PoolSettings

WORKER = ROOT / "worker" / "celery" / "worker"
ENTRY_POINT = "cli.py"
READS = re.compile(r"os\.environ|os\.getenv|getenv\(")


def test_only_the_entry_point_touches_the_environment() -> None:
    """No module of the worker side but cli.py, the entry point, reads os.environ: the rest ask settings.current()."""
    readers = sorted(
        path.name
        for path in WORKER.glob("*.py")
        if path.name != ENTRY_POINT and READS.search(path.read_text(encoding="utf-8"))
    )
    assert readers == []


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


def test_the_gate_command_reads_its_settings_in_main_alone() -> None:
    """Below gate.cli.main, the commands that run trials take their PROBEGATE_* defaults from args.settings."""
    for name in ("commands.py", "runcommands.py", "settings.py", "flakes.py"):
        assert not READS.search((ROOT / "gate" / "cli" / name).read_text(encoding="utf-8")), name
