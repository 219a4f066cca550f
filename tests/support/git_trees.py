"""Real git repositories in temporary folders for the tree-selection tests, isolated from the
machine's git configuration (no global excludes file, no system config)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test's git ignores the user's and the system's configuration."""
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("HOME", str(tmp_path))


def git(root: Path, *args: str) -> str:
    cmd = ["git", "-C", str(root), "-c", "user.email=gate@example.invalid", "-c", "user.name=gate", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write `files` (relative path → text or bytes) under `root`; returns `root`."""
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
    return root


def repo(root: Path, files: dict[str, str | bytes], links: dict[str, str] | None = None) -> Path:
    """A git repository at `root` with `files` and `links` (path → target) committed."""
    write(root, files)
    for rel, target in (links or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / rel)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base", "--allow-empty")
    return root
