"""Unpacking a foreign tar (gate.io.untar): the checks made where Python has no extraction filters refuse
what the "data" filter refuses, and unpack a benign tree as the filter does."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from gate.io.untar import UnsafeMember, extract_checked, extract_data


def archive(*members: tuple[tarfile.TarInfo, bytes | None]) -> tarfile.TarFile:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buffer.seek(0)
    return tarfile.open(fileobj=buffer)


def entry(name: str, kind: bytes = tarfile.REGTYPE, *, data: bytes = b"", link: str = "", mode: int = 0o644):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname, info.uid, info.gid = kind, mode, link, 4242, 4242
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


BENIGN = (
    entry("src", tarfile.DIRTYPE, mode=0o755),
    entry("src/app.py", data=b"print(1)\n"),
    entry("run.sh", data=b"#!/bin/sh\n", mode=0o4777),
    entry("link", tarfile.SYMTYPE, link="src/app.py"),
    entry("src/up", tarfile.SYMTYPE, link="../run.sh"),
    entry("hard", tarfile.LNKTYPE, link="src/app.py"),
)


def tree(root: Path) -> dict[str, tuple[str, int | str]]:
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        info = path.lstat()
        found[rel] = ("link", os.readlink(path)) if path.is_symlink() else ("node", stat.S_IMODE(info.st_mode))
    return found


def test_a_benign_tree_unpacks_as_the_data_filter_unpacks_it(tmp_path: Path) -> None:
    """Files, folders, an inner link and a hard link come out as Python's own "data" filter makes them:
    the set-uid bit and group/other write gone, links kept."""
    extract_checked(archive(*BENIGN), tmp_path / "ours")
    if not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no extraction filters to compare with")
    archive(*BENIGN).extractall(tmp_path / "python", filter="data")
    assert tree(tmp_path / "ours") == tree(tmp_path / "python")
    assert tree(tmp_path / "ours")["run.sh"] == ("node", 0o755)


@pytest.mark.parametrize(
    ("member", "said"),
    [
        (entry("../escape.txt", data=b"x"), "outside the destination"),
        (entry("a/../../escape.txt", data=b"x"), "outside the destination"),
        (entry("out", tarfile.SYMTYPE, link="/etc/passwd"), "links to an absolute path"),
        (entry("out", tarfile.SYMTYPE, link="../../etc"), "links outside the destination"),
        (entry("hard", tarfile.LNKTYPE, link="../elsewhere"), "links outside the destination"),
        (entry("dev", tarfile.CHRTYPE), "special file"),
        (entry("fifo", tarfile.FIFOTYPE), "special file"),
    ],
)
def test_what_the_data_filter_refuses_is_refused(tmp_path: Path, member: tuple, said: str) -> None:
    """An escaping path, an absolute or escaping link, a device or a FIFO: UnsafeMember (a TarError, which
    the callers turn into their one-line refusals), and nothing written outside the destination."""
    with pytest.raises(UnsafeMember, match=said):
        extract_checked(archive(entry("ok.txt", data=b"ok"), member), tmp_path / "dest")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest"]
    assert issubclass(UnsafeMember, tarfile.TarError)


def test_a_link_unpacked_first_cannot_carry_a_later_member_out(tmp_path: Path) -> None:
    """A member written through a folder link that an earlier member made is checked against where it
    really lands: a link inside the destination is followed, one leading out was refused already."""
    inner = archive(entry("d", tarfile.DIRTYPE, mode=0o755), entry("l", tarfile.SYMTYPE, link="d"))
    extract_checked(inner, tmp_path / "dest")
    assert (tmp_path / "dest" / "l").resolve() == (tmp_path / "dest" / "d").resolve()
    with pytest.raises(UnsafeMember, match="outside the destination"):
        extract_checked(archive(entry("l/../../x", data=b"x")), tmp_path / "dest")


def test_extract_data_uses_the_filter_where_python_has_one(tmp_path: Path) -> None:
    """The entry point unpacks a benign tree on this Python whichever path it takes."""
    extract_data(archive(*BENIGN), tmp_path / "dest")
    assert (tmp_path / "dest" / "src" / "app.py").read_bytes() == b"print(1)\n"
