"""Ctrl-C during `gate run` leaves no container behind and does not wait out the deadlines."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice"


def _hanging_run(folder: Path) -> list[str]:
    """`gate run` of the example's hanging patch with minute-long deadlines, its suite and card in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    suite = folder / "gate.toml"
    # Long deadlines: without the abort the run would take a minute to drain.
    suite.write_text((EXAMPLE / "gate.toml").read_text().replace("deadline_s = 2.0", "deadline_s = 60.0"))
    for name in ("checks.py", "flake-freeze.json"):
        (folder / name).write_bytes((EXAMPLE / name).read_bytes())
    return [
        *(sys.executable, "-m", "gate.run", "--suite", str(suite), "--workdir", str(EXAMPLE / "patches" / "hangs")),
        *("--fixture", str(EXAMPLE / "fixtures"), "--seal", str(EXAMPLE / ".fixture-seal")),
        *("--card", str(folder / "card.json"), "--new-ledger"),
    ]


def test_sigint_mid_run_removes_every_container(tmp_path: Path, docker_client, sandbox_image: str) -> None:
    """SIGINT while hanging probes run exits 130 within seconds and no probegate container remains."""
    cmd = _hanging_run(tmp_path)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        mine = {"label": f"probegate.pid={proc.pid}"}  # containers this gate process started
        while not docker_client.containers.list(filters=mine, sparse=True):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no probe container ever started"
            time.sleep(0.1)
        time.sleep(1.0)  # let the hanging probes settle into their loops
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - interrupted
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert took < 20, f"interrupt took {took:.1f}s: the run waited for its deadlines"
    assert docker_client.containers.list(all=True, filters=mine, sparse=True) == []
    assert not (tmp_path / "card.json").exists()  # an interrupted run stamps no card


def test_a_run_removes_the_containers_a_killed_run_left(tmp_path: Path, docker_client, sandbox_image: str) -> None:
    """A `gate run` killed outright (SIGKILL: no clean-up) leaves its containers; the next `gate run` on this
    host removes them when it starts, and leaves a live process's containers alone."""
    cmd = _hanging_run(tmp_path / "first")
    killed = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mine = {"label": f"probegate.pid={killed.pid}"}
    try:
        deadline = time.monotonic() + 60
        while not docker_client.containers.list(filters=mine, sparse=True):
            assert killed.poll() is None, killed.communicate()
            assert time.monotonic() < deadline, "no probe container ever started"
            time.sleep(0.1)
    finally:
        killed.kill()
        killed.communicate(timeout=30)
    assert docker_client.containers.list(all=True, filters=mine, sparse=True), "the killed run left nothing"
    live = docker_client.containers.create(
        sandbox_image,
        ["true"],
        labels={"probegate.run": "live", "probegate.pid": str(os.getpid()), "probegate.host": socket.gethostname()},
    )
    try:
        second = subprocess.run(
            [*_hanging_run(tmp_path / "second"), "--property", "no_secret_in_output"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in second.stderr, second.stderr
        assert docker_client.containers.list(all=True, filters=mine, sparse=True) == []
        live.reload()  # still there: its (pretended) owner is alive
    finally:
        live.remove(force=True)
