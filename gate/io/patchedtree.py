"""The patched tree as found on disk: its selected files and symlinks, read without ever following a
link on the host; sealing it, copying it into a private snapshot and checking it fits the sandbox.

A symlink travels as a symlink (its target is part of the digest) when it stays inside the tree: its
target, resolved lexically from the link's folder, must not be absolute or climb out with `..`, and
must not climb (`..`) after passing through another link of the tree — `a/up -> ..` is inside, but
`x -> a/up/..` resolves above the root, in the container as in the worker's tar filter. Links are
never followed here: every path is opened one component at a time with O_NOFOLLOW, so a folder
swapped for a link after the scan is refused, not read through.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from gate.core.errors import FixtureTreeError, InputMissingError, TreeTooLargeError
from gate.core.suite.seal import Seal, compute_tree, sort_key
from gate.core.suite.treelimits import TreeSize, refusal, tree_size
from gate.core.suite.trial import Limits
from gate.io.treeselect import WHOLE_TREE, TreeSelection, select_paths, walk_paths

CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a file swapped for a FIFO after the scan must not hang the reader.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NOT_BENEATH = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)  # gone, or a link or file where a folder was


@dataclass(frozen=True)
class PatchedTree:
    """The entries of a patched tree under `root`: regular files (path → bytes) and symlinks (path → target)."""

    root: Path
    files: dict[str, int]
    links: dict[str, str]

    def size(self) -> TreeSize:
        """What the tree asks of the sandbox: entries, work space, largest file."""
        return tree_size(self.files, self.links)


class Beneath:
    """Entries under `root`, reached one component at a time with O_NOFOLLOW (never through a link);
    only the chain of folders of the current path is kept open, so walk paths in `sort_key` order."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._chain: list[tuple[str, int]] = []

    def folder(self, parts: Sequence[str]) -> int | None:
        """An fd of the folder `parts` below the root, or None when a component is missing or not a folder."""
        common = 0
        while common < min(len(parts), len(self._chain)) and self._chain[common][0] == parts[common]:
            common += 1
        for _, fd in self._chain[common:]:
            os.close(fd)
        del self._chain[common:]
        for part in parts[common:]:
            parent = self._chain[-1][1] if self._chain else self._root_fd
            try:
                self._chain.append((part, os.open(part, _DIR_FLAGS, dir_fd=parent)))
            except OSError as exc:
                if exc.errno in _NOT_BENEATH:
                    return None
                raise
        return self._chain[-1][1] if self._chain else self._root_fd

    def lstat(self, rel: str) -> os.stat_result | None:
        """What `rel` is, not following it; None when it is absent (or beneath something not a folder)."""
        *parents, name = rel.split("/")
        folder = self.folder(parents)
        if folder is None:
            return None
        try:
            return os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def readlink(self, rel: str) -> str:
        """The target of the link `rel`, read without following it."""
        *parents, name = rel.split("/")
        folder = self.folder(parents)
        if folder is None:
            raise FileNotFoundError(errno.ENOENT, "vanished", rel)
        return os.readlink(name, dir_fd=folder)

    def open(self, rel: str) -> int:
        """A read-only fd of the regular file `rel`; a link, folder or special file there is refused."""
        *parents, name = rel.split("/")
        folder = self.folder(parents)
        if folder is None:
            raise FileNotFoundError(errno.ENOENT, "vanished", rel)
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise FixtureTreeError(f"{rel} is not a regular file", file=str(self.root))
        return fd

    def close(self) -> None:
        """Close every folder this walker holds open."""
        self.folder(())
        os.close(self._root_fd)

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def read_patched_tree(workdir: Path, selection: TreeSelection = WHOLE_TREE) -> PatchedTree:
    """The patched tree in `workdir` as `selection` (and git) select it, checked entry by entry."""
    return scan_tree(workdir, select_paths(workdir, selection))


def laid_out(root: Path) -> PatchedTree:
    """Every entry of a tree laid out in a private folder (a snapshot, an unpacked blob), checked again."""
    return scan_tree(root, walk_paths(root))


def scan_tree(root: Path, paths: Iterable[str]) -> PatchedTree:
    """The files and symlinks at `paths` under `root`. A path that is gone (or lies beneath a link or a
    file, as git sees a tracked file whose folder became a link) is absent; a folder is skipped (git
    lists its files); a special file, or a link that leads out of the tree, is refused naming it."""
    files: dict[str, int] = {}
    links: dict[str, str] = {}
    try:
        with Beneath(root) as beneath:
            for rel in sorted(paths, key=sort_key):
                found = beneath.lstat(rel)
                if found is None or stat.S_ISDIR(found.st_mode):
                    continue
                if stat.S_ISREG(found.st_mode):
                    files[rel] = found.st_size
                elif stat.S_ISLNK(found.st_mode):
                    links[rel] = _target(beneath.readlink(rel), rel, root)
                else:
                    raise FixtureTreeError(f"{rel} is not a regular file or a symlink", file=str(root))
    except OSError as exc:
        raise InputMissingError(f"cannot read {exc.filename or root}: {exc.strerror or exc}", file=str(root)) from None
    for rel, target in links.items():
        why = link_problem(rel, target, links)
        if why:
            raise FixtureTreeError(
                f"symlink {rel} -> {target} {why}; the patched tree may only hold links that stay inside it",
                file=str(root),
            )
    return PatchedTree(root=root, files=files, links=links)


def link_problem(rel: str, target: str, links: Mapping[str, str]) -> str:
    """Why the link at `rel` pointing at `target` could reach outside the tree (empty when it cannot).
    Lexical: nothing on disk is looked at; `links` are the tree's other links."""
    if target.startswith("/"):
        return "is absolute"
    at = rel.split("/")[:-1]
    through = ""
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if through:
                return f"climbs (..) out of {through}, itself a link"
            if not at:
                return "points outside the tree"
            at.pop()
            continue
        at.append(part)
        if "/".join(at) in links:
            through = through or "/".join(at)
    return ""


def seal_patched(tree: PatchedTree) -> Seal:
    """The digest of the tree's files (bytes) and links (targets), read without following any link."""
    try:
        with Beneath(tree.root) as beneath:
            return compute_tree(tree.files, lambda rel: _chunks(beneath, rel), tree.links)
    except OSError as exc:
        raise InputMissingError(f"cannot read {exc.filename}: {exc.strerror or exc}", file=str(tree.root)) from None


def copy_tree(tree: PatchedTree, dest: Path) -> None:
    """Copy the tree's entries into the new folder `dest`: files with their mode bits and times, links as
    links. Not `shutil.copytree`: that walks the work tree again by name, and would read through a
    folder swapped for a link after the scan; this reads each file the scan found, beneath its root."""
    dest.mkdir()
    try:
        with Beneath(tree.root) as beneath:
            for rel in sorted([*tree.files, *tree.links], key=sort_key):
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                if rel in tree.links:
                    os.symlink(tree.links[rel], target)
                    continue
                with open(beneath.open(rel), "rb") as source, open(target, "xb") as copy:
                    shutil.copyfileobj(source, copy, CHUNK)
                    found = os.fstat(source.fileno())
                    os.fchmod(copy.fileno(), stat.S_IMODE(found.st_mode) & 0o777)
                os.utime(target, ns=(found.st_atime_ns, found.st_mtime_ns))
    except OSError as exc:
        raise InputMissingError(f"cannot copy {exc.filename}: {exc.strerror or exc}", file=str(tree.root)) from None


def check_fits(tree: PatchedTree, limits: Limits, *, where: Path | None = None) -> None:
    """Refuse, in one line naming the limit, a tree the sandbox cannot lay out under `limits`."""
    why = refusal(tree.size(), limits)
    if why is not None:
        raise TreeTooLargeError(why, file=str(where or tree.root))


def _chunks(beneath: Beneath, rel: str) -> Iterator[bytes]:
    with open(beneath.open(rel), "rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def _target(target: str, rel: str, root: Path) -> str:
    try:
        target.encode("utf-8")
    except UnicodeEncodeError:
        raise FixtureTreeError(f"symlink {rel} has a target that is not UTF-8", file=str(root)) from None
    return target
