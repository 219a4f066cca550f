"""The invoice example's paired suite (examples/invoice/paired.toml) on real Docker through the local pool:
a patch that lowers routing from 0.95 to 0.85 is blocked by the paired rule though the fixed 8-of-10 band
passes it, a patch that leaves the rate alone passes and is accepted, and a run without --base refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gate_runs import EXAMPLE, gate_run
from support.example_repo import example_repo

from gate.core.errors import RET_USAGE

pytestmark = pytest.mark.integration

PAIRED, BAND = "routing_no_worse_than_base", "routing_band_8_of_10"
# Seeds under which the slipping patch's band property lands 9 hits in 10 (it passes 8 of 10 about four runs
# in five): pinned so the comparison the example draws is the same on every run.
PAIRED_SEEDS = ("--replay-seeds", "paired-3")


def row(card: dict, pid: str) -> dict:
    return next(r for r in card["properties"] if r["id"] == pid)


def test_a_patch_that_lowers_the_rate_a_little_is_blocked_though_the_band_passes(
    tmp_path: Path, sandbox_image: str
) -> None:
    """Base 0.95, patch 0.85: the paired row is inconclusive_sample and says it is worse than the base; the
    fixed band passes the same patch; both sides' trials are on the card's evidence, and refold agrees."""
    run = gate_run(
        EXAMPLE, "paired/slips", tmp_path / "slips" / "card.json", *PAIRED_SEEDS, new_ledger=True, suite="paired.toml"
    )
    assert run.kinds() == {PAIRED: "inconclusive_sample", BAND: "pass"}, run.stderr
    paired = row(run.card, PAIRED)
    assert "worse than the base by 0.05" in paired["detail"] and paired["trials"] < 400
    assert paired["paired"]["state"] == "worse" and paired["paired"]["pairs"]["base_only"] > 0
    base = paired["paired"]["base"]
    assert base["hit"] + base["miss"] == paired["trials"] and paired["trials"] % 20 == 0
    assert run.accept != 0
    evidence = subprocess.run(
        [sys.executable, "-m", "gate.cli", "evidence", str(run.card_path), "--json", "--property", PAIRED],
        capture_output=True,
        text=True,
        timeout=60,
    )
    views = json.loads(evidence.stdout)["properties"]
    assert [(v["side"], v["counts"]["trials"]) for v in views] == [
        ("patch", paired["trials"]),
        ("base", paired["trials"]),
    ]
    refolded = subprocess.run(
        [sys.executable, "-m", "gate.cli", "refold", str(run.card_path)], capture_output=True, text=True, timeout=60
    )
    assert refolded.returncode == 0 and f"{PAIRED}: agrees (inconclusive_sample" in refolded.stdout


def test_a_patch_that_leaves_the_rate_alone_passes_and_is_accepted(tmp_path: Path, sandbox_image: str) -> None:
    """A refactor with the base's odds: every pair agrees, the paired test passes at its first possible wave."""
    # Pinned seeds: on fresh ones the band row of a 0.95 rate misses 8 of 10 about once a hundred runs.
    run = gate_run(
        EXAMPLE, "paired/same_rate", tmp_path / "same" / "card.json", *PAIRED_SEEDS,
        new_ledger=True, suite="paired.toml", accept_extra=("--allow-replayed-seeds",),
    )  # fmt: skip
    assert run.kinds() == {PAIRED: "pass", BAND: "pass"}, run.stderr
    paired = row(run.card, PAIRED)
    assert paired["paired"]["pairs"]["base_only"] == paired["paired"]["pairs"]["patch_only"] == 0
    assert paired["trials"] == 60  # 58 agreeing pairs pass a 0.05 margin; pairs go out in waves of 20
    assert (run.code, run.accept) == (0, 0)


def test_a_run_without_a_base_refuses_the_paired_suite_in_one_line(tmp_path: Path, sandbox_image: str) -> None:
    """No --base: exit 64 and one line naming the paired property, before any container or card."""
    repo = example_repo(tmp_path / "repo", "paired/same_rate")
    card = tmp_path / "card.json"
    oracle = ("--suite", str(repo.root / "paired.toml"), "--workdir", str(repo.app), "--seal", str(repo.seal))
    done = subprocess.run(
        [sys.executable, "-m", "gate.cli", "run", *oracle, "--card", str(card), "--new-ledger"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == RET_USAGE and not card.exists()
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and PAIRED in said[0] and "--base" in said[0], done.stderr
