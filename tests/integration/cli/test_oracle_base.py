"""The oracle comes from the base, and nothing of the patched tree runs on the coordinator. Each test
is a patch built to slip through, committed over the example's base in a real git repository and
run in real Docker with `--base`; each asserts the run's exit and accept's exit."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from gate_runs import script_accept, script_run
from support.example_repo import Repo, apply_patch, example_repo, git
from support.paths import INVOICE

from gate.core.errors import RET_BLOCKED, RET_OK, RET_USAGE


def gate_run(repo: Repo, card: Path, *extra: str, cwd: Path | None = None) -> tuple[int, dict, str]:
    return script_run(repo, card, "--new-ledger", *extra, cwd=cwd)


def gate_accept(repo: Repo, card: Path, *, cwd: Path | None = None, python: tuple[str, ...] = ()) -> int:
    return script_accept(repo, card, cwd=cwd, command=python).returncode


@pytest.fixture
def repo(tmp_path: Path, sandbox_image: str) -> Repo:
    """The example as a repository: base commit with the good tree, no patch yet."""
    return example_repo(tmp_path / "repo")


def commit(repo: Repo, message: str) -> None:
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", message)


def test_the_good_patch_over_the_base_is_accepted_without_the_unchecked_flag(repo: Repo, tmp_path: Path) -> None:
    """A clean patch run with --base is accepted by `gate accept --base`, with no unchecked-oracle flag."""
    code, card, _ = gate_run(repo, tmp_path / "card.json")
    assert (code, card["status"], card["new_oracle_edits"]) == (RET_OK, "accepted", [])
    assert gate_accept(repo, tmp_path / "card.json") == RET_OK


def test_a_patch_that_rewrites_the_checks_is_judged_by_the_base_checks(repo: Repo, tmp_path: Path) -> None:
    """A patch with a rounding bug that also makes checks.py pass everything is judged by the base's
    checks (fail_contract) and its checks edit is an oracle edit: blocked, refused."""
    source = (repo.app / "invoicing").glob("*.py")
    for path in source:
        path.write_text(path.read_text().replace("ROUND_HALF_EVEN", "ROUND_HALF_UP"))
    (repo.root / "checks.py").write_text(
        (repo.root / "checks.py").read_text() + "\n\ndef invoice_total(trial):\n    return True\n"
    )
    commit(repo, "fix rounding (and the checks)")
    code, card, _ = gate_run(repo, tmp_path / "card.json")
    kinds = {row["id"]: row["kind"] for row in card["properties"]}
    assert kinds["invoice_total_half_even"] == "fail_contract"
    assert "checks.py" in card["new_oracle_edits"]
    assert code == RET_BLOCKED and gate_accept(repo, tmp_path / "card.json") == 1


def test_an_oracle_edit_hidden_from_the_index_is_still_found(repo: Repo, tmp_path: Path) -> None:
    """checks.py edited in the work tree and hidden with skip-worktree (git diff shows nothing) is an oracle edit."""
    (repo.root / "checks.py").write_text((repo.root / "checks.py").read_text() + "\n# quietly weakened\n")
    git(repo.root, "update-index", "--skip-worktree", "checks.py")
    assert git(repo.root, "status", "--porcelain") == ""  # git itself no longer sees the edit
    code, card, _ = gate_run(repo, tmp_path / "card.json")
    assert card["new_oracle_edits"] == ["checks.py"]
    assert code == RET_BLOCKED and gate_accept(repo, tmp_path / "card.json") == 1


def test_an_untracked_fixture_and_a_swapped_seal_are_oracle_edits(repo: Repo, tmp_path: Path) -> None:
    """A new file dropped into the fixture tree and a rewritten seal file are both oracle edits."""
    (repo.root / "fixtures" / "invoices" / "extra.json").write_text("{}")
    repo.seal.write_text(repo.seal.read_text().replace("a", "b", 1))
    code, card, _ = gate_run(repo, tmp_path / "card.json")
    assert set(card["new_oracle_edits"]) >= {"fixtures/invoices/extra.json", ".fixture-seal"}
    assert code == RET_BLOCKED


def test_a_base_missing_from_a_shallow_clone_says_how_to_fetch_it(repo: Repo, tmp_path: Path) -> None:
    """In a shallow clone that lacks the base commit, --base exits 64 telling how to fetch it."""
    apply_patch(repo.root, INVOICE / "patches" / "crashes")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo.root}", str(shallow)], check=True)
    clone = Repo(root=shallow, base=repo.base)
    code, _, err = gate_run(clone, tmp_path / "card.json")
    assert code == RET_USAGE
    assert "shallow clone" in err and "fetch" in err and len(err.strip().splitlines()) == 1


SHADOWS = {
    "json.py": "json",
    "sitecustomize.py": "sitecustomize",
    "usercustomize.py": "usercustomize",
    "checks.py": "checks",
    "pydantic.py": "pydantic",
    "gate/__init__.py": "gate",
}


def test_nothing_of_the_patched_tree_runs_on_the_coordinator(repo: Repo, tmp_path: Path) -> None:
    """Modules in the patched tree that shadow what the coordinator imports (json, sitecustomize,
    checks, pydantic, gate itself, a .pth) never run there, with the gate started inside the tree."""
    marker = Path(f"/tmp/probegate-pwned-{uuid.uuid4().hex}")
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for rel in SHADOWS:
        (repo.app / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo.app / rel).write_text(payload)
    (repo.app / "zz-probegate.pth").write_text(f"import os; os.system('touch {marker}')\n")
    commit(repo, "shadow everything")
    try:
        code, card, _ = gate_run(repo, tmp_path / "card.json", cwd=repo.app)
        assert card, "the run wrote no card"
        accepted = gate_accept(repo, tmp_path / "card.json", cwd=repo.app)
        module_form = (sys.executable, "-P", "-m", "gate.cli")
        careful = gate_accept(repo, tmp_path / "card.json", cwd=repo.app, python=module_form)
        assert not marker.exists(), marker.read_text()
        # The patch's own shadows do run inside the sandbox (its json.py breaks its probe): that is its business.
        assert code in (RET_OK, RET_BLOCKED) and accepted == careful
    finally:
        marker.unlink(missing_ok=True)


def test_the_plain_module_form_inside_a_patched_tree_is_hijackable(repo: Repo, tmp_path: Path) -> None:
    """Why docs/reference/commands.md says `python -P -m`: without -P, `python -m` in the patched tree imports
    its modules."""
    marker = Path(f"/tmp/probegate-pwned-{uuid.uuid4().hex}")
    (repo.app / "gate").mkdir()
    (repo.app / "gate" / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write('gate')\n")
    try:
        env = {**os.environ, "PYTHONSAFEPATH": ""}
        subprocess.run([sys.executable, "-m", "gate.cli", "--version"], cwd=repo.app, env=env, capture_output=True)
        assert marker.exists()
        marker.unlink()
        subprocess.run([sys.executable, "-P", "-m", "gate.cli", "--version"], cwd=repo.app, capture_output=True)
        assert not marker.exists()
    finally:
        marker.unlink(missing_ok=True)
