"""`gate baseline` on the unpatched tree: findings about the suite itself, a calibration file, and
deadlines that `gate run` then reports as calibrated — the only ones a timeout can be promoted on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gate_runs import EXAMPLE, gate_run

from gate.core.errors import RET_BLOCKED, RET_OK

pytestmark = pytest.mark.integration


@pytest.fixture
def example(tmp_path: Path) -> Path:
    dest = tmp_path / "invoice"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def baseline(example: Path, patch: str, calibration: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gate.cli",
            "baseline",
            "--suite",
            str(example / "gate.toml"),
            "--workdir",
            str(example / "patches" / patch),
            "--seal",
            str(example / ".fixture-seal"),
            "--calibration",
            str(calibration),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_baseline_writes_a_calibration_that_run_uses(example: Path, tmp_path: Path, sandbox_image: str) -> None:
    """A clean base tree exits 0, writes p50/p95 per property, and the next run's rows are calibrated."""
    calibration = tmp_path / "calibration.json"
    done = baseline(example, "good", calibration)
    assert done.returncode == RET_OK, done.stderr
    written = json.loads(calibration.read_text())
    assert set(written["properties"]) == {
        "no_unmapped_write",
        "no_secret_in_output",
        "invoice_total_half_even",
        "json_shape_v3",
        "tool_choice_rate",
    }
    assert written["seal"] == (example / ".fixture-seal").read_text().split()[0]
    assert written["properties"]["tool_choice_rate"]["trials"] == 10
    assert json.loads(done.stdout.splitlines()[-1])["findings"] == []
    run = gate_run(example, "good", tmp_path / "card.json", "--calibration", str(calibration), new_ledger=True)
    assert {r["deadline_source"] for r in run.card["properties"]} == {"calibrated"}
    plain = gate_run(example, "good", tmp_path / "plain.json")
    assert {r["deadline_source"] for r in plain.card["properties"]} == {"proposal"}


def test_baseline_flags_a_property_that_fails_on_the_base_tree(
    example: Path, tmp_path: Path, sandbox_image: str
) -> None:
    """If the unpatched tree already fails a contract, the property is wrong: exit 1 naming it."""
    done = baseline(example, "half_up_rounding", tmp_path / "calibration.json")
    assert done.returncode == RET_BLOCKED
    findings = json.loads(done.stdout.splitlines()[-1])["findings"]
    assert any(f.startswith("invoice_total_half_even:") and "property is wrong" in f for f in findings)


def test_timeout_is_promoted_only_on_a_calibrated_deadline(example: Path, tmp_path: Path, sandbox_image: str) -> None:
    """timeout_is_safety turns a hang into fail_safety only when a baseline backs the deadline."""
    suite = example / "gate.toml"
    suite.write_text(
        suite.read_text().replace(
            'check = "checks:invoice_total"\ndeadline_s = 5.0',
            'check = "checks:invoice_total"\ndeadline_s = 5.0\ntimeout_is_safety = true',
        )
    )
    calibration = tmp_path / "calibration.json"
    assert baseline(example, "good", calibration).returncode == RET_OK
    # Only the promoted property runs: the hang costs its whole deadline on each property it reaches.
    only = ("--property", "invoice_total_half_even")
    proposal = gate_run(example, "hangs", tmp_path / "proposal.json", *only, new_ledger=True)
    calibrated = gate_run(example, "hangs", tmp_path / "calibrated.json", *only, "--calibration", str(calibration))
    row = next(r for r in proposal.card["properties"] if r["id"] == "invoice_total_half_even")
    assert (row["kind"], row["deadline_source"], row["timeout_is_safety"]) == ("inconclusive_timeout", "proposal", True)
    row = next(r for r in calibrated.card["properties"] if r["id"] == "invoice_total_half_even")
    assert (row["kind"], row["deadline_source"]) == ("fail_safety", "calibrated")
    assert calibrated.code == RET_BLOCKED
