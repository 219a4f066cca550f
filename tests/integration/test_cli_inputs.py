"""Every bad input gets one line on stderr naming the file and field, a documented exit code, no
traceback, and nothing is run. These tests drive the real `gate` console script in a subprocess;
each error stops the run before any container would start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gate.core.errors import RET_BLOCKED, RET_CONFIG, RET_NOINPUT, RET_USAGE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice"
GATE = [sys.executable, "-m", "gate.cli"]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A private copy of the invoice example that a test may break."""
    dest = tmp_path / "invoice"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def gate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*GATE, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def run_args(ex: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--suite",
        str(ex / "gate.toml"),
        "--workdir",
        str(ex / "patches" / "good"),
        "--seal",
        str(ex / ".fixture-seal"),
        "--card",
        str(ex / "out" / "card.json"),
        *extra,
    ]


def assert_one_line(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("gate: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_missing_suite_file_is_noinput(example: Path) -> None:
    """A suite path that does not exist exits 66 and names the file."""
    (example / "gate.toml").unlink()
    assert_one_line(gate(*run_args(example)), RET_NOINPUT, "gate.toml", "suite file not found")


def test_invalid_toml_is_config_error(example: Path) -> None:
    """A suite that is not TOML exits 65 and names the file."""
    (example / "gate.toml").write_text("[suite\nname=", encoding="utf-8")
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "gate.toml", "not valid TOML")


def test_property_without_band_is_refused(example: Path) -> None:
    """An unclassified property never runs: exit 65 naming the file and the property."""
    text = (
        (example / "gate.toml")
        .read_text()
        .replace('band = "contract"\nfixture = "invoices/inv-002-tie.json"', 'fixture = "invoices/inv-002-tie.json"')
    )
    (example / "gate.toml").write_text(text)
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "gate.toml", "property invoice_total_half_even", "no band")


def test_unknown_band_is_refused(example: Path) -> None:
    """A band outside safety/contract/statistical exits 65 naming the property and field."""
    text = (example / "gate.toml").read_text().replace('band = "safety"', 'band = "vibes"')
    (example / "gate.toml").write_text(text)
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "property no_unmapped_write", "band")


def test_missing_check_function_is_refused(example: Path) -> None:
    """A check naming a function the checks module lacks exits 65 naming the property."""
    text = (example / "gate.toml").read_text().replace("checks:tool_choice", "checks:no_such_check")
    (example / "gate.toml").write_text(text)
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "property tool_choice_rate", "no_such_check")


def test_fixture_outside_seal_is_refused(example: Path) -> None:
    """A property bound to a file that is not in the sealed tree exits 65 naming the property."""
    text = (example / "gate.toml").read_text().replace("tools/refund-query.json", "tools/missing.json")
    (example / "gate.toml").write_text(text)
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "property tool_choice_rate", "tools/missing.json")


def test_missing_seal_file_is_noinput(example: Path) -> None:
    """A seal file that does not exist exits 66 and says how to make one."""
    (example / ".fixture-seal").unlink()
    assert_one_line(gate(*run_args(example)), RET_NOINPUT, ".fixture-seal", "gate seal")


def test_malformed_seal_file_is_config_error(example: Path) -> None:
    """A seal file whose first line is not a digest exits 65."""
    (example / ".fixture-seal").write_text("not-a-digest\n")
    assert_one_line(gate(*run_args(example)), RET_CONFIG, ".fixture-seal", "64-hex-digit")


def test_missing_clock_is_config_error(example: Path) -> None:
    """A fixture tree without clock.json exits 65 naming clock.json."""
    (example / "fixtures" / "clock.json").unlink()
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "clock.json")


def test_naive_clock_is_config_error(example: Path) -> None:
    """A clock.json instant without an offset exits 65 naming the field."""
    (example / "fixtures" / "clock.json").write_text(json.dumps({"frozen_at": "2026-03-01T00:00:00"}))
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "clock.json", "frozen_at")


def test_freezing_a_safety_property_is_refused(example: Path) -> None:
    """A freeze file that names a safety property exits 65: safety is never frozen."""
    seal = (example / ".fixture-seal").read_text().split()[0]
    entry = {
        "freeze_id": "f1",
        "properties": ["no_unmapped_write"],
        "seal": seal,
        "reason": "flaked",
        "expires_at": "2099-01-01T00:00:00Z",
        "retry_allowed": False,
    }
    (example / "flake-freeze.json").write_text(json.dumps({"freezes": [entry]}))
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "flake-freeze.json", "safety")


def test_freeze_with_retry_allowed_is_refused(example: Path) -> None:
    """A freeze entry with retry_allowed true exits 65 naming the field."""
    seal = (example / ".fixture-seal").read_text().split()[0]
    entry = {
        "freeze_id": "f1",
        "properties": ["tool_choice_rate"],
        "seal": seal,
        "reason": "flaked",
        "expires_at": "2099-01-01T00:00:00Z",
        "retry_allowed": True,
    }
    (example / "flake-freeze.json").write_text(json.dumps({"freezes": [entry]}))
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "flake-freeze.json", "retry_allowed")


def test_symlink_in_fixture_tree_is_refused(example: Path) -> None:
    """`gate seal` refuses a symlink in the tree with exit 65 naming it."""
    (example / "fixtures" / "link.json").symlink_to(example / "fixtures" / "clock.json")
    assert_one_line(gate("seal", str(example / "fixtures")), RET_CONFIG, "link.json", "symlink")


def test_seal_of_missing_dir_is_noinput(tmp_path: Path) -> None:
    """`gate seal` on a directory that does not exist exits 66."""
    assert_one_line(gate("seal", str(tmp_path / "nope")), RET_NOINPUT, "nope")


def test_unknown_flag_is_usage_error(example: Path) -> None:
    """An unknown flag exits 64 (not argparse's 2, which would read as "harness broken")."""
    assert_one_line(gate(*run_args(example, "--frobnicate")), RET_USAGE, "--frobnicate")


def test_negative_retries_is_usage_error(example: Path) -> None:
    """--retries below zero exits 64."""
    assert_one_line(gate(*run_args(example, "--retries", "-1")), RET_USAGE, "--retries")


def test_missing_workdir_is_noinput(example: Path) -> None:
    """A patched tree that does not exist exits 66 naming --workdir."""
    args = run_args(example)
    args[args.index("--workdir") + 1] = str(example / "patches" / "nope")
    assert_one_line(gate(*args), RET_NOINPUT, "--workdir")


def test_base_outside_git_is_usage_error(example: Path) -> None:
    """--base on a tree that is not a git checkout exits 64 naming --base."""
    assert_one_line(gate(*run_args(example, "--base", "HEAD")), RET_USAGE, "--base")


def test_accept_missing_card_is_a_failed_gate(example: Path) -> None:
    """accept with no card exits 1 and prints a rejected decision."""
    done = gate("accept", "--card", str(example / "none.json"), "--seal", str(example / ".fixture-seal"))
    assert done.returncode == RET_BLOCKED
    assert json.loads(done.stdout)["accepted"] is False
    assert "Traceback" not in done.stderr


def test_accept_garbage_card_is_a_failed_gate(example: Path) -> None:
    """accept with an unreadable card exits 1 naming the card file."""
    (example / "card.json").write_text('{"run_id": 3}')
    done = gate("accept", "--card", str(example / "card.json"), "--seal", str(example / ".fixture-seal"))
    assert done.returncode == RET_BLOCKED
    assert "card.json" in json.loads(done.stdout)["reasons"][0]


def test_schema_card_prints_the_published_schema() -> None:
    """`gate schema card` prints a JSON schema whose required fields include the accept inputs."""
    done = gate("schema", "card")
    assert done.returncode == 0
    schema = json.loads(done.stdout)
    assert schema["title"] == "VerdictCard"
    assert {"retry_count", "fixture", "properties", "new_oracle_edits", "image_id"} <= set(schema["properties"])
