"""The Docker daemon killed in the middle of a run: every property it cut off is a harness_error,
the harness is broken (exit 2) and no harness credit is drawn, on a fresh ledger and on one with
credits left. The engine is restarted afterwards; these tests run last (marker `restarts_engine`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import docker
import pytest
from run_containers import probe_running

from gate.io.fixtures import seal_tree, write_seal_file
from worker.host.engine import docker_client
from worker.host.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]
PROPERTIES = 8
SUITE = """
[suite]
name = "daemon-loss"
probe = "python3 probe.py"

[suite.limits]
memory_mb = 64
"""
PROPERTY = """
[[property]]
id = "p{i}"
band = "contract"
fixture = "in.json"
check = "builtin:exits_zero"
deadline_s = 20.0
"""


def _dockerd() -> int | None:
    found = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True)
    pids = [int(p) for p in found.stdout.split()]
    return pids[0] if pids else None


@pytest.fixture
def killable_engine(docker_client: docker.DockerClient) -> None:
    """Root and a dockerd process on this machine, or skip (fail under CI=true)."""
    if os.geteuid() != 0 or _dockerd() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but this process cannot kill and restart dockerd")
        pytest.skip("needs root and a local dockerd")


@pytest.fixture
def slow_suite(tmp_path: Path) -> Path:
    """Eight contract properties whose probe sleeps 1.5 s: the run lasts long enough to be cut."""
    root = tmp_path / "suite"
    (root / "fixtures").mkdir(parents=True)
    (root / "fixtures" / "in.json").write_text("{}")
    (root / "fixtures" / "clock.json").write_text('{"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}')
    (root / "gate.toml").write_text(SUITE + "".join(PROPERTY.format(i=i) for i in range(PROPERTIES)))
    (root / "checks.py").write_text("")
    (root / "tree").mkdir()
    (root / "tree" / "probe.py").write_text("import time\ntime.sleep(1.5)\nprint('{}')\n")
    write_seal_file(root / "seal", seal_tree(root / "fixtures"))
    return root


def _reaped(pid: int, timeout: float = 60) -> None:
    """Wait until the killed dockerd is gone, zombie included: a new dockerd refuses to start while its pid
    file names a process that still exists (seen in CI: "pid file found, ensure docker is not running")."""
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}"):
        assert time.monotonic() < deadline, f"the killed dockerd (pid {pid}) was not reaped within {timeout} s"
        time.sleep(0.1)


def _restart_engine() -> docker.DockerClient:
    """Bring dockerd back the way CI provisions it, and wait until it answers."""
    subprocess.run(["bash", str(ROOT / "deploy" / "provision.sh"), "--no-redis"], check=True, timeout=300)
    deadline = time.monotonic() + 60
    while True:
        try:
            return docker_client()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _cut_run(root: Path, ledger: Path, *extra: str) -> tuple[int, dict]:
    """Start `gate run`, kill dockerd once its first containers run, and return (exit, card)."""
    card = root / "out" / "card.json"
    cmd = [
        *(sys.executable, "-m", "gate.cli", "--log-level", "warning", "run"),
        *("--suite", str(root / "gate.toml"), "--workdir", str(root / "tree"), "--fixture", str(root / "fixtures")),
        *("--seal", str(root / "seal"), "--card", str(card), "--ledger", str(ledger), "--jobs", "2", *extra),
    ]
    gate = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = None
    try:
        client = docker_client()
        deadline = time.monotonic() + 60
        while not probe_running(client, gate.pid):  # the trials are under way, not just their containers
            assert gate.poll() is None, gate.communicate()
            assert time.monotonic() < deadline, "no probe ran in a container of the run within 60 s"
            time.sleep(0.1)
        pid = _dockerd()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        _, err = gate.communicate(timeout=180)
    finally:
        if gate.poll() is None:
            gate.kill()
        if pid is not None:
            _reaped(pid)
        client = _restart_engine()
    assert "Traceback" not in err, err
    written = json.loads(card.read_text())
    sweep(client, written["run_id"])
    return gate.returncode, written


@pytest.mark.restarts_engine
@pytest.mark.parametrize("ledger_state", ["fresh", "credits_left"])
def test_a_killed_daemon_breaks_the_harness_without_drawing_credits(
    killable_engine: None, slow_suite: Path, tmp_path: Path, ledger_state: str
) -> None:
    """Killing dockerd mid-run ends the job with exit 2 and harness_broken, and no credit is drawn."""
    ledger = tmp_path / "ledger.json"
    before: dict = {}
    if ledger_state == "credits_left":
        # p0 already drew one of its two credits an hour ago: one is left.
        expires = (datetime.now(UTC) + timedelta(hours=5)).isoformat()
        before = {"p0": {"property_id": "p0", "remaining": 1, "expires_at": expires, "last_detail": "earlier"}}
        ledger.write_text(json.dumps({"credits": before, "sampler_window": []}))
    code, card = _cut_run(slow_suite, ledger, *(("--new-ledger",) if ledger_state == "fresh" else ()))
    kinds = [row["kind"] for row in card["properties"]]
    assert kinds.count("harness_error") >= 2, kinds
    assert (code, card["status"], card["exit_code"]) == (2, "harness_broken", 2)
    assert card["ledger_actions"] == []
    after = json.loads(ledger.read_text())["credits"]
    assert {k: c["remaining"] for k, c in after.items()} == {k: c["remaining"] for k, c in before.items()}
    assert any("draws no credit" in reason for reason in card["reasons"]), card["reasons"]
