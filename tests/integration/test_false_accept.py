"""No false accept, end to end (real git, real Docker, the `gate` console script): a patch whose
output makes a check raise is refused on a fresh ledger and on one with credits left; a card is
refused for another tree and when edited by hand."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from example_repo import EXAMPLE, Repo, apply_patch, example_repo, git
from gate_runs import script_accept, script_run

from gate.core.errors import RET_BLOCKED, RET_OK

API = "invoicing/api.py"
# Agent-style edits to the good product code; each makes a check raise (not assert) on the output.
RAISING = {
    "unit_suffix": ('"total": str(net + tax),', '"total": str(net + tax) + " EUR",'),
    "nested_total": ('"total": str(net + tax),', '"total": {"amount": str(net + tax)},'),
    "list_not_object": ("    return result\n", "    return [result]\n"),
}


def run(repo: Repo, card: Path, ledger: Path, *, new: bool) -> tuple[int, dict]:
    code, written, _ = script_run(repo, card, "--ledger", str(ledger), *(("--new-ledger",) if new else ()))
    return code, written


def accept(repo: Repo, card: Path) -> subprocess.CompletedProcess[str]:
    return script_accept(repo, card)


def patched(tmp_path: Path, edit: tuple[str, str]) -> Repo:
    repo = example_repo(tmp_path / "repo")
    api = repo.app / API
    assert edit[0] in api.read_text()
    api.write_text(api.read_text().replace(edit[0], edit[1]))
    git(repo.root, "commit", "-qam", "an agent's patch")
    return repo


@pytest.mark.parametrize("ledger_state", ["fresh", "credits_left"])
@pytest.mark.parametrize("name", sorted(RAISING))
def test_output_that_makes_a_check_raise_is_refused(
    tmp_path: Path, sandbox_image: str, name: str, ledger_state: str
) -> None:
    """A patch whose output makes a check raise (unit suffix, nesting, a list for an object) is
    fail_contract: blocked (exit 1), refused by accept, and no harness credit is drawn."""
    repo = patched(tmp_path, RAISING[name])
    ledger = tmp_path / "ledger.json"
    if ledger_state == "credits_left":
        expires = (datetime.now(UTC) + timedelta(hours=5)).isoformat()
        credit = {"property_id": "invoice_total_half_even", "remaining": 1, "expires_at": expires, "last_detail": "x"}
        ledger.write_text(json.dumps({"credits": {credit["property_id"]: credit}, "sampler_window": []}))
    code, card = run(repo, tmp_path / "card.json", ledger, new=ledger_state == "fresh")
    row = next(r for r in card["properties"] if r["id"] == "invoice_total_half_even")
    assert row["kind"] == "fail_contract", row
    assert (code, card["ledger_actions"]) == (RET_BLOCKED, [])
    assert accept(repo, tmp_path / "card.json").returncode == 1


def test_a_card_replayed_for_another_tree_is_refused(tmp_path: Path, sandbox_image: str) -> None:
    """The good patch's accepted card is refused once the tree being merged is another patch."""
    repo = example_repo(tmp_path / "repo")
    card = tmp_path / "card.json"
    code, _ = run(repo, card, tmp_path / "ledger.json", new=True)
    assert code == RET_OK and accept(repo, card).returncode == RET_OK
    apply_patch(repo.root, EXAMPLE / "patches" / "crashes")
    done = accept(repo, card)
    assert done.returncode == 1 and "the card was made for tree" in done.stdout


def test_a_hand_edited_card_is_refused(tmp_path: Path, sandbox_image: str) -> None:
    """A blocked card edited on disk to say pass/accepted (kind, status, exit code and reasons) is refused."""
    repo = example_repo(tmp_path / "repo", "half_up_rounding")
    card = tmp_path / "card.json"
    code, data = run(repo, card, tmp_path / "ledger.json", new=True)
    assert code == RET_BLOCKED
    for row in data["properties"]:
        row["kind"], row["detail"] = "pass", ""
    data.update(status="accepted", exit_code=0, reasons=[])
    card.write_text(json.dumps(data))
    done = accept(repo, card)
    assert done.returncode == 1 and "card disagrees with itself" in done.stdout


def test_a_tree_too_large_for_the_sandbox_is_the_patchs_fault(tmp_path: Path, sandbox_image: str) -> None:
    """A patch that grows the tree past the work dir's space (3 x 30 MB into a 64 MB tmpfs) fails its
    properties as the patch's doing: blocked (exit 1), no harness_error and no credit drawn."""
    repo = example_repo(tmp_path / "repo")
    for index in range(3):
        (repo.app / f"blob-{index}.bin").write_bytes(b"\0" * (30 << 20))
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", "vendor some data")
    code, card = run(repo, tmp_path / "card.json", tmp_path / "ledger.json", new=True)
    kinds = {r["kind"] for r in card["properties"]}
    assert "harness_error" not in kinds and "fail_safety" in kinds, card["properties"]
    assert any("the patch broke the trial" in r["detail"] for r in card["properties"])
    assert (code, card["ledger_actions"]) == (RET_BLOCKED, [])
