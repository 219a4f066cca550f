"""The tree's signatures read from the tree itself, path by path, when overlay mode uses it in place
as its lower layer (worker/box/overlay.py, `setup_in_place`): the `before` of every trial without
reading the whole tree once per container.

It answers exactly what `Template(lower).signatures(work)` would (fsdiff.py): the same entries (a
dir, a regular file or a symlink reached through real dirs only; os.walk follows no symlinked dir,
so neither does a lookup here) and the same signatures. The lower is a read-only mount of a private
snapshot that nothing writes while the container lives, so an answer read late, and kept, equals one
read at once.

Stdlib-only, mounted read-only beside supervisor.py and imported by it inside the sandbox.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping

try:  # inside the sandbox: siblings in the same read-only mount
    from fsdiff import signature
except ImportError:  # imported on the host as worker.box.lowerview
    from worker.box.fsdiff import signature


class LowerView(Mapping):
    """path under `work` → the signature of the same path under `lower`, read when first looked up."""

    def __init__(self, lower: str, work: str) -> None:
        self._lower = lower.rstrip("/")
        self._work = work.rstrip("/")
        self._found: dict[str, str | None] = {}  # relative path → signature, None for no entry
        self._dirs: dict[str, bool] = {"": True}  # relative dir → a real dir of the lower?

    def __getitem__(self, path: str) -> str:
        found = self._lookup(path)
        if found is None:
            raise KeyError(path)
        return found

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self._lookup(path) is not None

    def __iter__(self) -> Iterator[str]:
        # Only a caller that wants every entry pays for a walk of the tree.
        return iter(self.below(self._work))

    def __len__(self) -> int:
        return len(self.below(self._work))

    def below(self, path: str) -> list[str]:
        """Every entry strictly below `path` (a path under work), sorted; none unless it is a dir."""
        rel = self._rel(path)
        if rel is None or not self._real_dir(rel):
            return []
        top_dir = os.path.join(self._lower, rel) if rel else self._lower
        found = []
        for top, dirs, files in os.walk(top_dir, onerror=_raise):
            for name in dirs + files:
                at = os.path.join(top, name)
                if _kind(os.lstat(at).st_mode) is not None:
                    found.append(self._work + at[len(self._lower) :])
        return sorted(found)

    def _rel(self, path: str) -> str | None:
        if path == self._work:
            return ""
        if not path.startswith(self._work + "/"):
            return None
        return path[len(self._work) + 1 :]

    def _lookup(self, path: str) -> str | None:
        rel = self._rel(path)
        if not rel:
            return None  # the work root itself is no entry, as in a snapshot
        if rel in self._found:
            return self._found[rel]
        parent, _, _ = rel.rpartition("/")
        found = None
        if self._real_dir(parent):
            try:
                found = _signature(os.path.join(self._lower, rel))
            except FileNotFoundError:
                found = None
        self._found[rel] = found
        return found

    def _real_dir(self, rel: str) -> bool:
        known = self._dirs.get(rel)
        if known is None:
            parent, _, _ = rel.rpartition("/")
            try:
                known = self._real_dir(parent) and stat.S_ISDIR(os.lstat(os.path.join(self._lower, rel)).st_mode)
            except (FileNotFoundError, NotADirectoryError):
                known = False
            self._dirs[rel] = known
        return known


def _kind(mode: int) -> str | None:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISREG(mode):
        return "file"
    return None  # fifos and the like have no place in a work copy (fsdiff.Template skips them too)


def _signature(path: str) -> str | None:
    """fsdiff.Template's signature of one lower entry; None for an entry a Template leaves out."""
    st = os.lstat(path)
    kind = _kind(st.st_mode)
    if kind is None:
        return None
    if kind == "file":
        # As Template.digest: the digest part of signature(), then the entry's own mode.
        return f"{signature(path).partition(':')[0]}:{stat.S_IMODE(st.st_mode):o}"
    return signature(path)


def _raise(error: OSError) -> None:
    raise error
