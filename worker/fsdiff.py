"""The writable places: filling /work from the tree, what they hold and what changed (the
supervisor's write detection), and wiping them between trials.

Stdlib-only, mounted read-only beside supervisor.py and imported by it inside the sandbox.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat


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


def copy_tree(src: str, dst: str) -> None:
    """Copy the entries of `src` into the existing directory `dst`."""
    for entry in os.scandir(src):
        target = os.path.join(dst, entry.name)
        if entry.is_dir(follow_symlinks=False):
            shutil.copytree(entry.path, target, symlinks=True)
        else:
            shutil.copy2(entry.path, target, follow_symlinks=False)
