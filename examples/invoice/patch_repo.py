"""The invoice example as a user's repository: a base commit holding the suite, its checks, the sealed
fixtures and the good product tree under `app/`, then a patch as a commit over it. Runs use
`--base` against the base commit, so the oracle comes from git, not from the patched tree.

    python3 examples/invoice/patch_repo.py DEST PATCH    # builds the repository, prints the base commit
    python3 examples/invoice/patch_repo.py DEST paired/slips    # a patch of the paired suite (paired.toml)

A patch folder that carries its own `fixtures/` stands for a base whose seal went stale (someone
retuned a fixture without resealing): those fixtures go into the base commit, and the patch is the
good tree. That is a harness fault the patch did not cause.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent
ORACLE = ("gate.toml", "paired.toml", "checks.py", "fixtures", ".fixture-seal", "flake-freeze.json")


@dataclass(frozen=True)
class Repo:
    root: Path
    base: str  # the base commit id

    @property
    def app(self) -> Path:
        return self.root / "app"

    @property
    def suite(self) -> Path:
        return self.root / "gate.toml"

    @property
    def seal(self) -> Path:
        return self.root / ".fixture-seal"

    def git(self, *args: str) -> str:
        return git(self.root, *args)


def git(root: Path, *args: str) -> str:
    cmd = ["git", "-C", str(root), "-c", "user.email=gate@example.invalid", "-c", "user.name=gate", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def example_repo(dest: Path, patch: str | None = "good", *, source: Path = EXAMPLE) -> Repo:
    """A repository whose base commit is the example with the good tree as `app/`; `patch` (a folder
    of `source/patches`, or `paired/NAME` for the paired suite's patches) is committed over it, except
    its own `fixtures/`, which go into the base: that patch stands for a base whose seal went stale
    (drift the patch did not cause)."""
    dest.mkdir(parents=True)
    for name in ORACLE:
        item = source / name
        if item.is_dir():
            shutil.copytree(item, dest / name)
        elif item.exists():
            shutil.copy2(item, dest / name)
    shutil.copytree(source / "patches" / "good", dest / "app", ignore=shutil.ignore_patterns("fixtures"))
    drift = patch_tree(source, patch or "good") / "fixtures"
    if drift.is_dir():
        shutil.rmtree(dest / "fixtures")
        shutil.copytree(drift, dest / "fixtures")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "base")
    base = git(dest, "rev-parse", "HEAD")
    if patch and patch != "good":
        apply_patch(dest, patch_tree(source, patch))
    return Repo(root=dest, base=base)


def patch_tree(source: Path, patch: str) -> Path:
    """Where a patch's tree is: `paired/NAME` under the example, any other name under its `patches/`."""
    return source / patch if patch.startswith("paired/") else source / "patches" / patch


def apply_patch(root: Path, tree: Path) -> None:
    """Replace `app/` with the patch's tree (its fixtures aside) and commit it, as an agent's patch lands."""
    shutil.rmtree(root / "app")
    shutil.copytree(tree, root / "app", ignore=shutil.ignore_patterns("fixtures"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", f"patch {tree.name}", "--allow-empty")


if __name__ == "__main__":
    made = example_repo(Path(sys.argv[1]), sys.argv[2])
    print(made.base)
