"""`gate init` in a fresh repository, then the gate on a committed change, as a new user runs it: the
console script, real git, real Docker, no --seal/--card/--new-ledger flags (the suite names the seal and
the card; init wrote the books)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from gate_runs import GATE

from gate.core.errors import RET_BLOCKED, RET_CONFIG, RET_OK

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
SLUGIFY = '''\
import re
import unicodedata


def slugify(text):
    """Lowercase ASCII words joined by '-'."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=GIT_ENV
    ).stdout


def gate(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `gate` console script (installed outside the repository) run from the repository's root."""
    done = subprocess.run([str(GATE), *args], cwd=repo, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def card(repo: Path) -> dict:
    return json.loads((repo / ".probegate" / "verdict-card.json").read_text())


@pytest.fixture
def repo(tmp_path: Path, sandbox_image: str) -> Path:
    """A fresh git repository holding one tiny module, with `gate init`'s files committed over it."""
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "textkit.py").write_text(SLUGIFY)
    commit_all(root, "a tiny module")
    done = gate(root, "init")
    assert done.returncode == RET_OK, done.stderr
    assert done.stdout.splitlines()[-2:] == ["  gate run --base HEAD~1", "  gate accept --base HEAD~1"]
    return root


def test_fresh_repository_flow_runs_and_accepts_with_no_flags(repo: Path) -> None:
    """init, commit, a committed product change, then `gate run --base HEAD~1` and `gate accept --base HEAD~1`
    both exit 0 with nothing but --base, and leave the repository clean (card and books are ignored)."""
    commit_all(repo, "add the probegate suite")
    (repo / "textkit.py").write_text(SLUGIFY + "\n\ndef shout(text):\n    return text.upper()\n")
    commit_all(repo, "a product change")
    ran = gate(repo, "--log-level", "warning", "run", "--base", "HEAD~1")
    assert ran.returncode == RET_OK, ran.stderr
    made = card(repo)
    assert (made["status"], made["new_oracle_edits"]) == ("accepted", [])
    assert {row["kind"] for row in made["properties"]} == {"pass"}
    assert {row["band"] for row in made["properties"]} == {"safety", "contract", "statistical"}
    accepted = gate(repo, "accept", "--base", "HEAD~1")
    assert accepted.returncode == RET_OK, accepted.stdout + accepted.stderr
    assert git(repo, "status", "--porcelain") == ""


def test_a_probe_calling_project_code_in_src_catches_a_broken_change(repo: Path) -> None:
    """The recipe of docs/how-to/gate-your-repository.md: the module moved to src/, `pythonpath = ["src"]`, the probe
    calling it; a patch that breaks the function fails the contract (run exits 1) and accept refuses (exit 1)."""
    (repo / "src").mkdir()
    (repo / "textkit.py").rename(repo / "src" / "textkit.py")
    toml = repo / "gate.toml"
    toml.write_text(toml.read_text().replace('# pythonpath = ["src"]', 'pythonpath = ["src"]', 1))
    probe = repo / "probe.py"
    stand_in = SLUGIFY.split('"""\n')[1]  # the probe template's stand-in body is textkit's function body
    assert stand_in in probe.read_text()
    call = "    from textkit import slugify\n\n    return slugify(text)\n"
    probe.write_text(probe.read_text().replace(stand_in, call, 1))
    commit_all(repo, "add the probegate suite, calling textkit")
    (repo / "src" / "textkit.py").write_text(SLUGIFY.replace("plain.lower()", "plain"))  # keeps capitals
    commit_all(repo, "a broken product change")
    ran = gate(repo, "--log-level", "warning", "run", "--base", "HEAD~1")
    kinds = {row["id"]: row["kind"] for row in card(repo)["properties"]}
    assert ran.returncode == RET_BLOCKED, ran.stderr
    assert kinds["exact_answer"] == "fail_contract" and kinds["stays_in_bounds"] == "pass"
    assert card(repo)["new_oracle_edits"] == []
    assert gate(repo, "accept", "--base", "HEAD~1").returncode == RET_BLOCKED


def test_a_patch_that_reseals_its_own_fixtures_is_judged_by_the_base_seal(repo: Path) -> None:
    """A patch that edits a fixture, rewrites the seal `[suite] seal` names to match and defangs the CI workflow
    is judged with the base's seal and fixtures, and all three are oracle edits: run exits 1, accept refuses."""
    commit_all(repo, "add the probegate suite")
    hello = repo / "fixtures" / "requests" / "hello.json"
    hello.write_text(json.dumps({"input": "Hello, World!", "expect": "HELLO"}))
    assert gate(repo, "reseal", "fixtures", "--seal", "fixtures.seal", "--write").returncode == RET_OK
    workflow = repo / ".github" / "workflows" / "probegate.yml"
    workflow.write_text(workflow.read_text().replace("gate accept", "true # gate accept"))
    commit_all(repo, "move the goalposts")
    ran = gate(repo, "--log-level", "warning", "run", "--base", "HEAD~1")
    made = card(repo)
    assert ran.returncode == RET_BLOCKED, ran.stderr
    assert {"fixtures.seal", "fixtures/requests/hello.json", ".github/workflows/probegate.yml"} <= set(
        made["new_oracle_edits"]
    )
    assert {row["kind"] for row in made["properties"]} == {"pass"}  # judged on the base's fixtures
    assert gate(repo, "accept", "--base", "HEAD~1").returncode == RET_BLOCKED


def test_a_patch_that_commits_code_into_the_gates_outputs_is_refused(repo: Path) -> None:
    """A patch that force-adds a module under `.probegate/evidence/` (left out of the sandbox and the digest,
    yet merged) and a guarded import of it is refused by run and by accept in one line (exit 65)."""
    commit_all(repo, "add the probegate suite")
    (repo / "textkit.py").write_text("try:\n    import evidence_hook\nexcept ImportError:\n    pass\n" + SLUGIFY)
    hook = repo / ".probegate" / "evidence" / "evidence_hook.py"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("import os\nos.system('true')\n")
    git(repo, "add", "-f", str(hook.relative_to(repo)))
    commit_all(repo, "hide a hook where the gate writes")
    for command in ("run", "accept"):
        done = gate(repo, "--log-level", "warning", command, "--base", "HEAD~1")
        assert done.returncode == RET_CONFIG, done.stdout + done.stderr
        assert ".probegate/evidence/evidence_hook.py is tracked by git but lies in the gate's outputs" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
