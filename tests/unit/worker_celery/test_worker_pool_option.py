"""`gate-worker serve --pool`: which standing pool the worker's processes take containers from, refused at
once when it names no socket, and the close-run command's reach into a pool that is not there."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gate.core.errors import UsageError
from worker.celery.worker.cli import WorkerSettings, _pool_option, build_parser
from worker.celery.worker.runs import end_pooled
from worker.celery.worker.settings import PoolSettings, configure


def test_pool_option_names_a_socket_off_or_the_workers_own(tmp_path: Path) -> None:
    """A listening socket's path is passed on resolved; "off" is passed on; "own" and no option change nothing."""
    path = tmp_path / "pool.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert _pool_option(str(path)) == str(path.resolve())
    assert _pool_option("off") == "off"
    assert _pool_option("own") == _pool_option(None) == ""


def test_pool_option_refuses_a_path_with_no_socket(tmp_path: Path) -> None:
    """A typo, or a plain file, is a usage error naming the path: never a worker that quietly starts containers."""
    (tmp_path / "file").write_text("")
    for wrong in (tmp_path / "missing.sock", tmp_path / "file"):
        with pytest.raises(UsageError, match=str(wrong)):
            _pool_option(str(wrong))


def test_serve_takes_the_pool_option() -> None:
    """`gate-worker serve --pool own` parses; without it the option is unset (the environment decides)."""
    parser = build_parser(WorkerSettings.from_env({}))
    assert parser.parse_args(["serve", "--pool", "own"]).pool == "own"
    assert parser.parse_args(["serve"]).pool is None


def test_ending_a_run_in_an_absent_pool_removes_nothing_and_never_raises(tmp_path: Path, monkeypatch) -> None:
    """The close-run command asks no pool when there is none, and survives one whose socket is gone."""
    configure(PoolSettings.from_env({"PROBEGATE_POOL": "off"}))
    assert end_pooled("run-1") == 0
    configure(PoolSettings.from_env({"PROBEGATE_POOL": str(tmp_path / "gone.sock")}))
    assert end_pooled("run-1") == 0
