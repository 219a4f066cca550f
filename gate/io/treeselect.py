"""Which files make the patched tree: the tree as git sees it, or globs outside git.

In a git work tree the patched tree is what git tracks plus the untracked files it does not ignore
(`git ls-files --cached --others --exclude-standard`, run in the work folder, so a subfolder of a
repository gives only what lies beneath it); outside git it is every file matching the suite's
`include` globs. Either way the suite's `exclude` globs and the gate's own outputs (`outputs` and
the card) are left out, and so is `.git`. The run's snapshot and the digest `gate accept` recomputes
take the same selection, so they agree on what the tree is.

The patch controls its own `.gitignore`, and so which untracked files are selected. That hides
nothing: an ignored file is neither copied into the sandbox (the probe cannot import it) nor part
of the digest, and ignoring never drops a tracked file, which is what a merge carries. For the same
reason a tracked file under the gate's outputs is refused rather than left out: a patch that commits
code there (`git add -f`) would otherwise be merged without the probe ever seeing it.
"""

from __future__ import annotations

import glob
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gate.core.errors import FixtureTreeError, InputMissingError, UsageError
from gate.core.report.proposals import FREEZE_PROPOSAL, LIFT_PROPOSAL, REPAIR_TASK
from gate.core.suite.seal import sort_key
from gate.core.suite.suite import Suite
from gate.io.fixtures import matches_any

GIT_DIR = ".git"
GITLINK = "160000"  # the index mode of a submodule
# Variables that point git at another repository than the one holding the work folder.
_GIT_LOCATORS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


@dataclass(frozen=True)
class TreeSelection:
    """The suite's terms for the patched tree: `include` (outside git only), `exclude`, and the
    gate's `outputs` (files it writes into the tree, left out so writing them changes nothing)."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    def left_out(self, rel: str) -> bool:
        """Whether `rel`, or a folder it lies in, matches an `exclude` or `outputs` glob."""
        return _under(rel, (*self.exclude, *self.outputs))

    def is_output(self, rel: str) -> bool:
        """Whether `rel`, or a folder it lies in, is one of the gate's outputs."""
        return _under(rel, self.outputs)

    def included(self, rel: str) -> bool:
        """Whether `rel`, or a folder it lies in, matches an `include` glob (outside git)."""
        return _under(rel, self.include)


WHOLE_TREE = TreeSelection()  # no suite: every file (and in git, what git selects)


def tree_selection(suite: Suite, workdir: Path, *, suite_file: Path) -> TreeSelection:
    """The selection a suite asks for. The card (`[suite] card`, relative to gate.toml's folder in the
    work tree, `suite_file`'s: with --base the suite itself is read from a checkout of the base) is
    an output when it lies inside `workdir`, and so are the evidence folder and flake files beside it."""
    outputs = list(suite.config.outputs)
    if suite.config.card:
        card = (suite_file.parent / suite.config.card).resolve()
        if card.is_relative_to(workdir.resolve()):  # else outside the tree: nothing to leave out
            # The evidence store beside the card (gate.io.evidence) is written with it: an output too.
            folder = card.parent.relative_to(workdir.resolve())
            outputs.append(glob.escape(folder.joinpath("evidence").as_posix()))
            # So are the flake files beside it (gate.io.proposals).
            outputs += [
                glob.escape(folder.joinpath(name).as_posix()) for name in (FREEZE_PROPOSAL, REPAIR_TASK, LIFT_PROPOSAL)
            ]
            outputs.append(glob.escape(card.relative_to(workdir.resolve()).as_posix()))
            # And its signature envelope (gate.io.cardsig: the card's name, `.dsse.json` appended).
            outputs.append(glob.escape(card.relative_to(workdir.resolve()).as_posix() + ".dsse.json"))
    return TreeSelection(include=suite.config.include, exclude=suite.config.exclude, outputs=tuple(outputs))


def select_paths(workdir: Path, selection: TreeSelection = WHOLE_TREE) -> list[str]:
    """Tree-relative POSIX paths of the patched tree's files and symlinks, sorted as the seal sorts.
    In git they come from the index and may name files since deleted, which scanning drops; a
    submodule or a nested repository is refused, naming it."""
    if not _is_dir(workdir):
        raise InputMissingError("directory not found", file=str(workdir))
    found = _git_paths(workdir, selection) if in_git(workdir) else walk_paths(workdir, selection)
    return sorted(found, key=sort_key)


def in_git(workdir: Path) -> bool:
    """Whether `workdir` lies in a git work tree (a `.git` folder or file in it or above it)."""
    start = workdir.resolve()
    return any(os.path.lexists(folder / GIT_DIR) for folder in (start, *start.parents))


def _git_paths(workdir: Path, selection: TreeSelection) -> set[str]:
    tracked = _ls_files(workdir, "--cached", "--stage")
    untracked = _ls_files(workdir, "--others", "--exclude-standard")
    paths: set[str] = set()
    for line in tracked:
        meta, _, rel = line.partition("\t")
        rel = _checked(rel, workdir)
        if selection.is_output(rel):
            # Left out of the sandbox and the digest, a tracked output would still be merged: code
            # the probe never saw. The gate writes these paths; a commit must not carry them.
            raise FixtureTreeError(
                f"{rel} is tracked by git but lies in the gate's outputs ([suite] outputs, card or evidence), "
                "so it would be merged untested; untrack it (git rm --cached) or move the outputs",
                file=str(workdir),
            )
        if selection.left_out(rel):
            continue
        if meta.split(" ")[0] == GITLINK:
            raise FixtureTreeError(
                f"{rel} is a git submodule, which the patched tree cannot hold; exclude it ([suite] exclude) "
                "or vendor its files",
                file=str(workdir),
            )
        paths.add(rel)
    for rel in (_checked(line, workdir) for line in untracked):
        if selection.left_out(rel.rstrip("/")):
            continue
        if rel.endswith("/"):  # git lists an untracked nested repository as one folder
            raise FixtureTreeError(
                f"{rel} is a git repository inside the tree; ignore it (.gitignore), exclude it ([suite] exclude) "
                "or add it as files",
                file=str(workdir),
            )
        paths.add(rel)
    return paths


def _ls_files(workdir: Path, *args: str) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key not in _GIT_LOCATORS}
    try:
        done = subprocess.run(
            ["git", "-C", str(workdir), "ls-files", "-z", *args], capture_output=True, check=False, env=env
        )
    except FileNotFoundError:
        raise UsageError(
            "lies in a git work tree; selecting its files needs git on PATH", file=str(workdir), field="--workdir"
        ) from None
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
        why = lines[0] if lines else f"exit {done.returncode}"
        raise UsageError(f"git ls-files failed: {why}", file=str(workdir), field="--workdir")
    return [os.fsdecode(item) for item in done.stdout.split(b"\0") if item]


def walk_paths(workdir: Path, selection: TreeSelection = WHOLE_TREE) -> list[str]:
    """Outside git (or in a private copy): every file and symlink `selection` takes, never descending
    into a link or a `.git` folder."""

    def refuse(exc: OSError) -> None:
        # os.walk would skip an unreadable folder silently, and the tree would miss its files.
        raise InputMissingError(f"cannot read {exc.filename}: {exc.strerror or exc}", file=str(workdir))

    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(workdir, onerror=refuse, followlinks=False):
        rel_dir = PurePosixPath(Path(dirpath).relative_to(workdir).as_posix())
        # A link to a folder is listed with the folders and not walked: it is an entry of its own.
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [
            d
            for d in dirnames
            if d != GIT_DIR and d not in links and not selection.left_out(_checked(str(rel_dir / d), workdir))
        ]
        for name in [*links, *filenames]:
            rel = _checked(str(rel_dir / name), workdir)
            if name != GIT_DIR and selection.included(rel) and not selection.left_out(rel):
                found.append(rel)
    return found


def _checked(rel: str, workdir: Path) -> str:
    """`rel` as a tree-relative POSIX path; a name that is not UTF-8 is refused (the seal hashes UTF-8)."""
    rel = rel.removeprefix("./")
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # os.fsdecode hands undecodable bytes over as lone surrogates
        raise FixtureTreeError(f"file name {rel} is not UTF-8; rename it", file=str(workdir)) from None
    return rel


def _under(rel: str, globs: Iterable[str]) -> bool:
    """Whether `rel` or one of the folders it lies in matches one of `globs`."""
    patterns = tuple(globs)
    if not patterns:
        return False
    parts = rel.split("/")
    return any(matches_any("/".join(parts[:end]), patterns) for end in range(1, len(parts) + 1))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # e.g. ENAMETOOLONG, which pathlib does not swallow
        return False
