"""The Docker daemon killed in the middle of a run: every property it cut off is a harness_error,
the harness is broken (exit 2) and no harness credit is drawn, on a fresh ledger and on one with
credits left. The daemon killed is a private second engine's (tests/integration/second_engine.py),
so the test shares nothing with the tests beside it; that engine is started again on its data root
afterwards, to take back and stop what the kill left running, and then removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import docker
import pytest
from run_containers import probe_running
from second_engine import SecondEngine

from gate.io.fixtures import seal_tree, write_seal_file
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


@pytest.fixture
def engine(docker_client: docker.DockerClient) -> Iterator[tuple[SecondEngine, docker.DockerClient]]:
    """A private second engine holding the sandbox image, and a client of it; stopped and removed afterwards."""
    engine = SecondEngine()
    try:
        yield engine, engine.start(docker_client)
    finally:
        engine.stop()


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


def _cut_runs(
    engine: SecondEngine, client: docker.DockerClient, runs: dict[str, tuple[Path, Path, tuple[str, ...]]]
) -> dict[str, tuple[int, dict]]:
    """Start one `gate run` per entry (suite root, ledger, extra flags) on `engine`, kill its dockerd once a
    probe of every run is under way, and return each run's (exit, card): one kill cuts them all."""
    gates: dict[str, subprocess.Popen[str]] = {}
    errs: dict[str, str] = {}
    killed = False
    try:
        for name, (root, ledger, extra) in runs.items():
            cmd = [
                *(sys.executable, "-m", "gate.cli", "--log-level", "warning", "run"),
                *("--suite", str(root / "gate.toml"), "--workdir", str(root / "tree")),
                *("--fixture", str(root / "fixtures"), "--seal", str(root / "seal")),
                *("--card", str(root / "out" / "card.json"), "--ledger", str(ledger), "--jobs", "2", *extra),
            ]
            env = {**os.environ, **engine.env}
            gates[name] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        for name, gate in gates.items():
            while not probe_running(client, gate.pid):  # the trials are under way, not just their containers
                assert gate.poll() is None, (name, gate.communicate())
                assert time.monotonic() < deadline, f"no probe ran in a container of the {name} run within 60 s"
                time.sleep(0.1)
        engine.kill()
        killed = True
        for name, gate in gates.items():
            errs[name] = gate.communicate(timeout=180)[1]
    finally:
        for gate in gates.values():
            if gate.poll() is None:
                gate.kill()
        if killed:  # its containers still run under their shims: the engine, back on its data root, stops them
            client = engine.restart()
    done = {}
    for name, (root, _, _) in runs.items():
        assert "Traceback" not in errs[name], errs[name]
        written = json.loads((root / "out" / "card.json").read_text())
        sweep(client, written["run_id"])
        done[name] = (gates[name].returncode, written)
    return done


def test_a_killed_daemon_breaks_the_harness_without_drawing_credits(
    engine: tuple[SecondEngine, docker.DockerClient], tmp_path: Path
) -> None:
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
        *engine,
        {
            "fresh": (slow_suite(fresh / "suite"), fresh / "ledger.json", ("--new-ledger",)),
            "credits_left": (slow_suite(spent / "suite"), spent / "ledger.json", ()),
        },
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
