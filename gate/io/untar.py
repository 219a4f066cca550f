"""Unpacking a tar that came from elsewhere (the base commit's `git archive`, a tree blob from the broker)
as Python's "data" extraction filter does: every path stays under the destination, no absolute names or
links, no link that leads out, no devices or FIFOs, no set-id bits or group/other write, no owner taken
from the archive.

Pythons before 3.11.4 have no extraction filters (Debian 12's python3 is 3.11.2, which `pipx install`
uses), and there `extractall(filter=...)` is a TypeError. There the same checks are made here, member by
member as each is extracted, so a link unpacked earlier is seen by the checks of the members after it.
"""

from __future__ import annotations

import copy
import os
import tarfile
from pathlib import Path


class UnsafeMember(tarfile.TarError):
    """A member the "data" filter refuses (the filter's own errors are TarErrors too)."""


def extract_data(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract every member of `tar` under `dest` with the "data" filter's rules; UnsafeMember (or the
    filter's own TarError) for a member that breaks them."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
    else:
        extract_checked(tar, dest)


def extract_checked(tar: tarfile.TarFile, dest: Path) -> None:
    """The "data" filter's rules, made here: for a Python without extraction filters (and for its tests)."""
    dest.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(dest)
    for member in tar.getmembers():
        tar.extract(_checked(member, root), root, set_attrs=not member.issym())


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([os.path.realpath(path), root]) == root


def _checked(member: tarfile.TarInfo, root: str) -> tarfile.TarInfo:
    """A copy of `member` as the "data" filter would extract it, or UnsafeMember."""
    safe = copy.copy(member)
    name = member.name.lstrip("/" + os.sep)
    if os.path.isabs(name):
        raise UnsafeMember(f"{member.name!r} is an absolute path")
    if not _inside(os.path.join(root, name), root):
        raise UnsafeMember(f"{member.name!r} would be extracted outside the destination")
    safe.name = name
    if not (member.isreg() or member.islnk() or member.isdir() or member.issym()):
        raise UnsafeMember(f"{member.name!r} is a special file (device, FIFO)")
    if member.islnk() or member.issym():
        if os.path.isabs(member.linkname):
            raise UnsafeMember(f"{member.name!r} links to an absolute path")
        start = os.path.dirname(name) if member.issym() else ""
        if not _inside(os.path.join(root, start, member.linkname), root):
            raise UnsafeMember(f"{member.name!r} links outside the destination")
    mode = member.mode & 0o755
    if member.isreg() or member.islnk():
        if not mode & 0o100:
            mode &= ~0o111  # executable for nobody unless for its owner
        mode |= 0o600
    safe.mode = mode
    # The archive's owners are not taken: the extracting user owns what it unpacks (as root, tarfile would
    # chown to the archive's uid and gid).
    safe.uid, safe.gid, safe.uname, safe.gname = os.getuid(), os.getgid(), "", ""
    return safe
