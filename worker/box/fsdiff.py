"""The writable places: filling /work from the tree, what they hold and what changed (the
supervisor's write detection), and wiping them between trials.

Stdlib-only, mounted read-only beside supervisor.py and imported by it inside the sandbox.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import stat
from collections.abc import Iterator, Mapping

PAGE = 4096


def signature(path: str) -> str:
    """What a path holds, permission bits included (a chmod is a write too): sha256, link target or type."""
    st = os.lstat(path)
    mode = f"{stat.S_IMODE(st.st_mode):o}"
    if stat.S_ISDIR(st.st_mode):
        return f"dir:{mode}"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        # Fifos, sockets, mqueues: never opened, since opening a fifo blocks.
        return f"special:{st.st_mode:o}:{st.st_size}:{st.st_mtime_ns}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return f"unreadable:{mode}:{st.st_size}:{st.st_mtime_ns}"
    digest = hashlib.sha256()
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)
    return f"{digest.hexdigest()}:{mode}"


def snapshot(roots: list[str]) -> dict[str, str]:
    """Every entry under the writable roots (not the roots themselves), path → signature."""
    seen: dict[str, str] = {}
    for root in roots:
        if not os.path.isdir(root):
            continue
        for top, dirs, files in os.walk(root, onerror=lambda _err: None):
            for name in dirs + files:
                path = os.path.join(top, name)
                try:
                    seen[path] = signature(path)
                except OSError:
                    seen[path] = "vanished"
    return seen


def diff(before: dict[str, str], after: dict[str, str]) -> list[dict]:
    """created / modified / deleted paths between two snapshots, sorted by path."""
    changes = []
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            change = "created"
        elif path not in after:
            change = "deleted"
        elif before[path] != after[path]:
            change = "modified"
        else:
            continue
        # Report undecodable names readably instead of leaking lone surrogates into JSON.
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        changes.append({"path": shown, "change": change})
    return changes


def wipe(root: str) -> None:
    """Empty a writable root (a tmpfs we may not remove or chmod itself), whatever modes the probe left."""
    if not os.path.isdir(root):
        return
    for entry in os.scandir(root):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)
        else:
            os.unlink(entry.path)


def remove_tree(path: str) -> None:
    # A probe may chmod 000 its directories; we own them (same uid), so give ourselves access back.
    os.chmod(path, 0o700)
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)
        else:
            os.unlink(entry.path)
    os.rmdir(path)


class Template:
    """A tree read once (layout, modes and times; each file's digest only when first asked for) and
    laid out again per trial far cheaper than shutil's copies (~30 ms for 300 small files), returning
    its own snapshot. The tree at `src` never changes while the template lives (a read-only mount of
    a private snapshot), so a digest taken late equals one taken at once: overlay mode asks only for
    the files a trial touched, and a 30,000-file tree is not hashed whole per container."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.bytes = 0  # what the files take on a tmpfs: each rounded up to whole pages
        # (relative path, "dir" | "file" | "link", st_mode bits, mtime_ns, link target or "")
        self.entries: list[tuple[str, str, int, int, str]] = []
        self._digests: dict[str, str] = {}
        for top, dirs, files in os.walk(src):
            dirs.sort()
            for name in dirs + sorted(files):
                path = os.path.join(top, name)
                st = os.lstat(path)
                rel = os.path.relpath(path, src)
                if stat.S_ISDIR(st.st_mode):
                    self.entries.append((rel, "dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns, ""))
                elif stat.S_ISLNK(st.st_mode):
                    self.entries.append((rel, "link", 0, 0, os.readlink(path)))
                elif stat.S_ISREG(st.st_mode):
                    self.bytes += -(-st.st_size // PAGE) * PAGE
                    self.entries.append((rel, "file", stat.S_IMODE(st.st_mode), st.st_mtime_ns, ""))
                # Anything else has no place in a work copy (sealed trees hold none).

    def digest(self, rel: str) -> str:
        """The sha256 of file `rel` of the tree, read once."""
        found = self._digests.get(rel)
        if found is None:
            found = self._digests[rel] = signature(os.path.join(self.src, rel)).partition(":")[0]
        return found

    def _signature(self, rel: str, kind: str, mode: int, extra: str) -> str:
        if kind == "dir":
            return f"dir:{mode:o}"
        if kind == "link":
            return "link:" + extra
        return f"{self.digest(rel)}:{mode:o}"

    def signatures(self, dst: str) -> Signatures:
        """What `snapshot` would say of the tree laid out at `dst`, without laying it out: the
        `before` of a trial whose work dir shows the tree some other way (an overlay, worker/box/overlay.py).
        A file's signature is computed when first looked up."""
        return Signatures(self, {os.path.join(dst, entry[0]): entry for entry in self.entries})

    def lay_out(self, dst: str) -> dict[str, str]:
        """Recreate the tree in the existing, empty `dst`; returns what `snapshot` would say of it."""
        return self._lay_out(dst, with_digests=True)

    def copy_to(self, dst: str) -> None:
        """Recreate the tree in the existing, empty `dst`, hashing nothing (overlay's lower layer)."""
        self._lay_out(dst, with_digests=False)

    def _lay_out(self, dst: str, *, with_digests: bool) -> dict[str, str]:
        seen: dict[str, str] = {}
        dirs: list[tuple[str, int]] = []
        for rel, kind, mode, mtime_ns, extra in self.entries:
            path = os.path.join(dst, rel)
            if kind == "dir":
                os.mkdir(path)
                os.chmod(path, mode)  # mkdir's mode is filtered by the umask; chmod is not
                dirs.append((path, mtime_ns))
            elif kind == "link":
                os.symlink(extra, path)
            else:
                _copy_file(os.path.join(self.src, rel), path, mode, mtime_ns)
            if with_digests:
                seen[path] = self._signature(rel, kind, mode, extra)
        for path, mtime_ns in reversed(dirs):  # last: filling a directory moves its mtime
            os.utime(path, ns=(mtime_ns, mtime_ns))
        return seen


class Signatures(Mapping):
    """path → signature of a template's entries laid out somewhere, each computed when looked up."""

    def __init__(self, template: Template, entries: dict[str, tuple[str, str, int, int, str]]) -> None:
        self._template = template
        self._entries = entries
        self._sorted: list[str] | None = None  # sorted once, and only if `below` is asked (O(tree))

    def __getitem__(self, path: str) -> str:
        rel, kind, mode, _mtime_ns, extra = self._entries[path]
        return self._template._signature(rel, kind, mode, extra)

    def __contains__(self, path: object) -> bool:
        return path in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def below(self, path: str) -> list[str]:
        """Every entry strictly below `path`, sorted."""
        if self._sorted is None:
            self._sorted = sorted(self._entries)
        start = bisect.bisect_left(self._sorted, path + "/")
        end = bisect.bisect_left(self._sorted, path + "0")  # "0" follows "/" in code point order
        return self._sorted[start:end]


def _copy_file(src: str, dst: str, mode: int, mtime_ns: int) -> None:
    fin = os.open(src, os.O_RDONLY)
    try:
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while os.sendfile(fout, fin, None, 1 << 30):
                pass
            os.fchmod(fout, mode)
            os.utime(fout, ns=(mtime_ns, mtime_ns))
        finally:
            os.close(fout)
    finally:
        os.close(fin)
