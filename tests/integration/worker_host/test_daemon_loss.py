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
from support.paths import ROOT

from gate.io.fixtures import seal_tree, write_seal_file
from worker.host.engine import docker_client
from worker.host.sweep import sweep

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


def slow_suite(root: Path) -> Path:
    """Eight contract properties whose probe sleeps 1.5 s, under `root`: the run lasts long enough to be cut."""
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


def _cut_runs(runs: dict[str, tuple[Path, Path, tuple[str, ...]]]) -> dict[str, tuple[int, dict]]:
    """Start one `gate run` per entry (suite root, ledger, extra flags), kill dockerd once a probe of every
    run is under way, and return each run's (exit, card): one engine restart serves them all."""
    gates: dict[str, subprocess.Popen[str]] = {}
    errs: dict[str, str] = {}
    pid = None
    try:
        for name, (root, ledger, extra) in runs.items():
            cmd = [
                *(sys.executable, "-m", "gate.cli", "--log-level", "warning", "run"),
                *("--suite", str(root / "gate.toml"), "--workdir", str(root / "tree")),
                *("--fixture", str(root / "fixtures"), "--seal", str(root / "seal")),
                *("--card", str(root / "out" / "card.json"), "--ledger", str(ledger), "--jobs", "2", *extra),
            ]
            gates[name] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        client = docker_client()
        deadline = time.monotonic() + 60
        for name, gate in gates.items():
            while not probe_running(client, gate.pid):  # the trials are under way, not just their containers
                assert gate.poll() is None, (name, gate.communicate())
                assert time.monotonic() < deadline, f"no probe ran in a container of the {name} run within 60 s"
                time.sleep(0.1)
        pid = _dockerd()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for name, gate in gates.items():
            errs[name] = gate.communicate(timeout=180)[1]
    finally:
        for gate in gates.values():
            if gate.poll() is None:
                gate.kill()
        if pid is not None:
            _reaped(pid)
        client = _restart_engine()
    done = {}
    for name, (root, _, _) in runs.items():
        assert "Traceback" not in errs[name], errs[name]
        written = json.loads((root / "out" / "card.json").read_text())
        sweep(client, written["run_id"])
        done[name] = (gates[name].returncode, written)
    return done


@pytest.mark.restarts_engine
def test_a_killed_daemon_breaks_the_harness_without_drawing_credits(killable_engine: None, tmp_path: Path) -> None:
    """Killing dockerd mid-run ends the job with exit 2 and harness_broken, and no credit is drawn, on a fresh
    ledger and on one with credits left (two runs cut by the same kill)."""
    fresh, spent = tmp_path / "fresh", tmp_path / "credits_left"
    # p0 already drew one of its two credits an hour ago: one is left.
    expires = (datetime.now(UTC) + timedelta(hours=5)).isoformat()
    before = {
        "fresh": {},
        "credits_left": {"p0": {"property_id": "p0", "remaining": 1, "expires_at": expires, "last_detail": "earlier"}},
    }
    (spent / "ledger.json").parent.mkdir(parents=True)
    (spent / "ledger.json").write_text(json.dumps({"credits": before["credits_left"], "sampler_window": []}))
    outcomes = _cut_runs(
        {
            "fresh": (slow_suite(fresh / "suite"), fresh / "ledger.json", ("--new-ledger",)),
            "credits_left": (slow_suite(spent / "suite"), spent / "ledger.json", ()),
        }
    )
    for name, (code, card) in outcomes.items():
        kinds = [row["kind"] for row in card["properties"]]
        assert kinds.count("harness_error") >= 2, (name, kinds)
        assert (code, card["status"], card["exit_code"]) == (2, "harness_broken", 2), name
        assert card["ledger_actions"] == [], name
        ledger = (fresh if name == "fresh" else spent) / "ledger.json"
        after = json.loads(ledger.read_text())["credits"]
        assert {k: c["remaining"] for k, c in after.items()} == {k: c["remaining"] for k, c in before[name].items()}
        assert any("draws no credit" in reason for reason in card["reasons"]), (name, card["reasons"])
