"""The writable places: filling /work from the tree, what they hold and what changed (the
supervisor's write detection), and wiping them between trials.

Stdlib-only, mounted read-only beside supervisor.py and imported by it inside the sandbox.
"""

from __future__ import annotations

import hashlib
import os
import stat

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
    """A tree read once (layout, modes, times and digests, not contents) and laid out again per trial
    far cheaper than shutil's copies (~30 ms for 300 small files), returning its own snapshot."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.bytes = 0  # what the files take on a tmpfs: each rounded up to whole pages
        # (relative path, "dir" | "file" | "link", st_mode bits, mtime_ns, digest or link target)
        self.entries: list[tuple[str, str, int, int, str]] = []
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
                    digest = signature(path).partition(":")[0]
                    self.bytes += -(-st.st_size // PAGE) * PAGE
                    self.entries.append((rel, "file", stat.S_IMODE(st.st_mode), st.st_mtime_ns, digest))
                # Anything else has no place in a work copy (sealed trees hold none).

    def signatures(self, dst: str) -> dict[str, str]:
        """What `snapshot` would say of the tree laid out at `dst`, without laying it out: the
        `before` of a trial whose work dir shows the tree some other way (an overlay, worker/box/overlay.py)."""
        seen: dict[str, str] = {}
        for rel, kind, mode, _mtime_ns, extra in self.entries:
            path = os.path.join(dst, rel)
            if kind == "dir":
                seen[path] = f"dir:{mode:o}"
            elif kind == "link":
                seen[path] = "link:" + extra
            else:
                seen[path] = f"{extra}:{mode:o}"
        return seen

    def lay_out(self, dst: str) -> dict[str, str]:
        """Recreate the tree in the existing, empty `dst`; returns what `snapshot` would say of it."""
        seen: dict[str, str] = {}
        dirs: list[tuple[str, int]] = []
        for rel, kind, mode, mtime_ns, extra in self.entries:
            path = os.path.join(dst, rel)
            if kind == "dir":
                os.mkdir(path)
                os.chmod(path, mode)  # mkdir's mode is filtered by the umask; chmod is not
                dirs.append((path, mtime_ns))
                seen[path] = f"dir:{mode:o}"
            elif kind == "link":
                os.symlink(extra, path)
                seen[path] = "link:" + extra
            else:
                _copy_file(os.path.join(self.src, rel), path, mode, mtime_ns)
                seen[path] = f"{extra}:{mode:o}"
        for path, mtime_ns in reversed(dirs):  # last: filling a directory moves its mtime
            os.utime(path, ns=(mtime_ns, mtime_ns))
        return seen


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
