"""The windows example as a team's repository: `repo/` committed as the base, then an agent's patch
(`patches/NAME.diff`, applied with `git apply`) committed over it. Beside the tracked files the work
tree holds what real checkouts hold and the gate must leave out: a `.venv` (with its lib64
symlink) and a large ignored `node_modules`.

    python3 examples/windows/patch_repo.py DEST PATCH    # builds the repository, prints the base commit
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent
BIG_MB = 80  # more than the sandbox's work space: were it selected, the run would be refused


def git(root: Path, *args: str) -> str:
    cmd = ["git", "-C", str(root), "-c", "user.email=gate@example.invalid", "-c", "user.name=gate", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def example_repo(dest: Path, patch: str = "good", *, interpreter: str | None = None) -> str:
    """Create the repository at `dest` with `patch` committed over the base; returns the base commit.
    `interpreter` sets the base suite's `[suite] interpreter` ("warm" or "fresh")."""
    shutil.copytree(EXAMPLE / "repo", dest, symlinks=True)
    if interpreter is not None:
        suite = dest / "gate.toml"
        suite.write_text(suite.read_text().replace("[suite]\n", f'[suite]\ninterpreter = "{interpreter}"\n', 1))
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "base: windowcal with its probegate suite")
    base = git(dest, "rev-parse", "HEAD")
    git(dest, "apply", str(EXAMPLE / "patches" / f"{patch}.diff"))
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", f"agent patch: {patch}", "--allow-empty")
    clutter(dest)
    return base


def clutter(dest: Path) -> None:
    """What a developer's checkout holds beside the code: ignored by git, so never in the tree."""
    venv.create(dest / ".venv", with_pip=False, symlinks=True)
    modules = dest / "node_modules" / "left-pad"
    modules.mkdir(parents=True)
    (modules / "index.js").write_text("module.exports = (s, n) => String(s).padStart(n);\n")
    with open(dest / "node_modules" / "bundle.bin", "wb") as handle:  # sparse: costs no disk
        handle.truncate(BIG_MB * 1024 * 1024)
    os.makedirs(dest / "src" / "windowcal" / "__pycache__", exist_ok=True)


if __name__ == "__main__":
    print(example_repo(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "good"))
