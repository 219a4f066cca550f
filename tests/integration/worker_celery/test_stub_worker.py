"""Adversarial: a `gate-worker --sandbox stub` runs nothing and reports a clean exit for every trial. Its
observations name no real image, so through real Celery they pass no row (and draw no credit): the patch
that writes outside its map is not accepted, and the card names the worker's wrong image."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import INVOICE as EXAMPLE

from gate.core.errors import RET_OK

pytestmark = pytest.mark.integration


def test_a_stub_sandbox_worker_passes_nothing(tmp_path: Path, redis_server, workers, sandbox_image: str) -> None:
    """The only worker runs no container; the safety property it "passed" is not a pass, the run is not
    accepted, and a wrong_image event names what it claimed to run in."""
    workers.start("stub", "--sandbox", "stub")
    workers.wait_ready()
    card = tmp_path / "card.json"
    run = subprocess.run(
        [
            *(sys.executable, "-m", "gate.cli", "run", "--suite", str(EXAMPLE / "gate.toml")),
            *("--workdir", str(EXAMPLE / "patches" / "unsafe_write"), "--fixture", str(EXAMPLE / "fixtures")),
            *("--seal", str(EXAMPLE / ".fixture-seal"), "--card", str(card), "--new-ledger"),
            *("--property", "no_unmapped_write", "--broker", redis_server.url),
            "--allow-unenrolled-workers",  # what is checked here is the image, whoever signs
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode != RET_OK, run.stdout
    made = json.loads(card.read_text())
    (row,) = made["properties"]
    assert row["kind"] != "pass" and "not the run's image" in row["detail"], row
    assert any(e["kind"] == "wrong_image" and "stub" in e["detail"] for e in made["harness_events"])
    assert not made["ledger_actions"] or all(a["action"] not in ("opened", "consumed") for a in made["ledger_actions"])
