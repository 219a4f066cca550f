"""No false accept, end to end (real git, real Docker, the `gate` console script): a patch whose
output makes a check raise is refused on a fresh ledger and on one with credits left; a card is
refused for another tree and when edited by hand."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import docker
import pytest
from gate_runs import GATE, oracle_args, script_accept, script_run
from run_containers import run_counting_containers
from support.example_repo import EXAMPLE, Repo, apply_patch, example_repo, git

from gate.core.errors import RET_BLOCKED, RET_CONFIG, RET_OK

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


# Kinds asserted: in both modes (conftest.py). The card refusals below never depend on the mode. Each raising
# edit meets one ledger state, and each state more than one edit: the check raises on the coordinator, which
# reads the books only after the verdict is made, so crossing the two would only repeat runs.
@pytest.mark.kinds
@pytest.mark.parametrize(
    ("name", "ledger_state"),
    [("unit_suffix", "fresh"), ("nested_total", "credits_left"), ("list_not_object", "credits_left")],
)
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


def test_a_tree_too_large_for_the_sandbox_is_refused_before_anything_runs(
    tmp_path: Path, sandbox_image: str, docker_client: docker.DockerClient
) -> None:
    """A patch that grows the tree past the work dir's space (3 x 30 MB into a 64 MB tmpfs) is refused
    in one line before any container starts: exit 65, no card, no credit drawn (the ledger is never
    written). It used to reach the sandbox and fail every property there as the patch's fault (exit 1,
    a card); the tree's size is known before anything runs, so failing in every container was only
    slower and noisier. Still no false accept: no card is written, and accept refuses without one."""
    repo = example_repo(tmp_path / "repo")
    for index in range(3):
        (repo.app / f"blob-{index}.bin").write_bytes(b"\0" * (30 << 20))
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", "vendor some data")
    card, ledger = tmp_path / "card.json", tmp_path / "ledger.json"
    cmd = [str(GATE), "--log-level", "warning", "run", *oracle_args(repo), "--card", str(card)]
    done, created = run_counting_containers(docker_client, [*cmd, "--ledger", str(ledger), "--new-ledger"])
    assert (done.returncode, created, card.exists(), ledger.exists()) == (RET_CONFIG, 0, False, False)
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"gate: error: {repo.app}: tree is 90.0 MB") and line.endswith("[suite.limits] tmpfs_mb")
    assert accept(repo, card).returncode == RET_BLOCKED
