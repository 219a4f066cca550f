"""The oracle from the base revision. With `--base REV`, the suite, checks module, fixture tree,
seal file, freeze file, calibration and probe entry are read from REV's git objects, extracted into
a private folder, never from the work tree the patch controls. Oracle edits are found by comparing
contents between that folder and the work tree, so untracked files and files git's index is told
to ignore (skip-worktree, assume-unchanged) are seen like any other.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from gate.core.errors import InputMissingError, UsageError
from gate.io.fixtures import matches_any
from gate.io.inputs import read_input
from gate.io.patchedtree import PatchedTree, scan_tree
from gate.io.treeselect import TreeSelection, walk_paths
from gate.io.untar import extract_data

SKIP = frozenset({".git"})


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False, text=not binary)
    except FileNotFoundError:
        raise UsageError("--base needs git on PATH") from None


class BaseCheckout:
    """REV's tree, extracted read-only into a private folder; maps work-tree paths to it and back."""

    def __init__(self, workdir: Path, rev: str) -> None:
        top = _git(workdir, "rev-parse", "--show-toplevel")
        if top.returncode != 0:
            raise UsageError("--base needs the patched tree inside a git checkout", file=str(workdir), field="--base")
        self.repo = Path(top.stdout.strip()).resolve()
        found = _git(self.repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if found.returncode != 0:
            raise UsageError(_missing_commit(self.repo, rev), file=str(self.repo), field="--base")
        self.rev = rev
        self.commit = found.stdout.strip()
        archive = _git(self.repo, "archive", "--format=tar", self.commit, binary=True)
        if archive.returncode != 0:
            why = archive.stderr.decode(errors="replace").strip().splitlines()[-1:]
            raise UsageError(f"cannot read base {rev}: git archive failed: {why}", field="--base")
        self._tmp = Path(tempfile.mkdtemp(prefix="probegate-base-")).resolve()
        self.root = self._tmp / "base"
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            extract_data(tar, self.root)  # paths stay inside, no devices or absolute links

    def at(self, path: Path) -> Path:
        """Where the work tree's `path` is in the base."""
        return self.root / self.relative(path)

    def relative(self, path: Path) -> Path:
        """`path` relative to the repository, lexically: a symlink the patch put in the tree is not
        followed (else an oracle file replaced by a link would be compared through its target)."""
        for candidate in (Path(os.path.abspath(path)), path.resolve()):
            try:
                return candidate.relative_to(self.repo)
            except ValueError:
                continue
        raise UsageError(f"lies outside the repository at {self.repo}", file=str(path), field="--base")

    def inside(self, path: Path) -> bool:
        """Whether `path` lies in the repository (so in what the patch's commit controls)."""
        try:
            self.relative(path)
        except UsageError:
            return False
        return True

    def lexical(self, path: Path) -> Path:
        """`path` in the work tree, absolute, with no in-tree symlink resolved."""
        return self.repo / self.relative(path)

    def worktree(self, base_path: Path) -> Path:
        """Where the base's `base_path` is in the work tree."""
        return self.repo / base_path.relative_to(self.root)

    def need(self, path: Path, what: str) -> Path:
        """The base's copy of the work tree's `path`, which must exist there."""
        found = self.at(path)
        if not found.exists():
            raise InputMissingError(f"{what} is not in base {self.rev}", file=str(self.relative(path)), field="--base")
        return found

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> BaseCheckout:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def base_tree(folder: Path, selection: TreeSelection) -> PatchedTree:
    """The base revision's version of the work folder (`BaseCheckout.at(workdir)`), read like a patched
    tree: every file the base commit holds there, less the suite's `exclude` and the gate's outputs.
    `include` does not apply: the extracted files are exactly what git tracked, as in a git work tree."""
    if not folder.is_dir():
        raise InputMissingError("the work folder is not in the base revision", file=str(folder), field="--base")
    return scan_tree(folder, walk_paths(folder, replace(selection, include=("*",))))


def _missing_commit(repo: Path, rev: str) -> str:
    shallow = _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    if shallow:
        return (
            f"base {rev} is not in this shallow clone: fetch it (`git fetch --deepen=100`, or check out with "
            "full history, e.g. actions/checkout's fetch-depth: 0)"
        )
    return f"base {rev} is not a commit in this repository"


def oracle_edits(
    base: BaseCheckout, *, files: Iterable[Path], trees: Iterable[Path], globs: Iterable[str], root: Path
) -> tuple[str, ...]:
    """Oracle paths (work-tree `files`, every file under `trees`, `globs` relative to `root`) whose
    content differs between the base and the work tree, or that exist on one side only. The folders
    on the way to each are compared too, so a folder swapped for a symlink is an edit."""
    root = base.lexical(root)
    paths = {base.lexical(path) for path in files}
    for tree in map(base.lexical, trees):
        paths |= {tree} | {tree / rel for rel in _walk(tree)} | {tree / rel for rel in _walk(base.at(tree))}
    patterns = list(globs)
    if patterns:
        candidates = set(_walk(root)) | set(_walk(base.at(root)))
        paths |= {root / rel for rel in candidates if matches_any(rel, patterns)}
    paths |= {parent for path in paths for parent in path.parents if parent.is_relative_to(base.repo)}
    paths.discard(base.repo)
    edited = [path for path in paths if _digest(path) != _digest(base.at(path))]
    return tuple(sorted(_shown(path, root) for path in edited))


def _walk(top: Path) -> list[str]:
    """Relative POSIX paths of every non-directory under `top` (none when it is absent)."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames[:] = [d for d in dirnames if d not in SKIP]
        rel = Path(dirpath).relative_to(top)
        found += [(rel / name).as_posix() for name in filenames]
        # A symlink to a folder is listed with the folders; it is an entry to compare all the same.
        found += [(rel / d).as_posix() for d in dirnames if Path(dirpath, d).is_symlink()]
    return found


def _digest(path: Path) -> str | None:
    """What a path holds, comparable across the two trees: None when absent. The work tree is the
    patch's: a FIFO or device at an oracle file's path is compared by its kind, never opened."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            return "link:" + os.readlink(path)
        if stat.S_ISDIR(mode):
            return "dir"
        if not stat.S_ISREG(mode):
            return f"special:{stat.S_IFMT(mode):o}"
        return hashlib.sha256(read_input(path, "oracle file")).hexdigest()
    except FileNotFoundError:
        return None
    except InputMissingError as exc:
        return f"unreadable:{exc.message}"
    except (OSError, ValueError) as exc:
        return f"unreadable:{getattr(exc, 'errno', None)}"


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
