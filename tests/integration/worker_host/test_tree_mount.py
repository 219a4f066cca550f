"""Tree mounts on the host (worker/host/treemount.py), as root on this machine's kernel: a shown tree
is read-only from its first instant, releasing and removing never reach into the tree, and the dirs
of a process killed mid-run are swept while a live one's stay."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import _unavailable
from support.paths import ROOT

from worker.host import treemount

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _root() -> None:
    if not treemount.enabled():
        _unavailable("tree mounts need root on Linux")


def container_dir(parent: Path, prefix: str) -> Path:
    """A container's host dir as runcontainers.create_warm lays it out: src made shared, stage beside it."""
    root = parent / f"{prefix}test"
    (root / "src").mkdir(parents=True)
    (root / "stage").mkdir()
    assert treemount.make_shared(root / "src")
    return root


def mounted_below(path: Path) -> list[str]:
    """The mount points this process sees at or below `path`."""
    return [point for point, _ in treemount._mounts() if point == str(path) or point.startswith(f"{path}/")]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "a.py").write_text("A = 1\n")
    (tree / "data.txt").write_text("orig\n")
    return tree


def test_a_shown_tree_is_read_only_and_release_leaves_no_mount(tmp_path: Path, tree: Path) -> None:
    """The tree reads through src, every write there is refused with EROFS, and release unmounts it all."""
    root = container_dir(tmp_path / "c", treemount.dir_prefix())
    src = root / "src"
    try:
        treemount.show(tree, src, root / "stage")
        assert (src / "pkg" / "a.py").read_text() == "A = 1\n"
        for write in (
            lambda: (src / "data.txt").write_text("patched\n"),
            lambda: (src / "new.txt").write_text("x"),
            lambda: (src / "pkg" / "a.py").unlink(),
            lambda: os.chmod(src / "data.txt", 0o777),
        ):
            with pytest.raises(OSError) as caught:
                write()
            assert caught.value.errno == errno.EROFS
        assert mounted_below(root / "stage") == [], "the staging bind outlived show"
    finally:
        treemount.release(src)
    assert mounted_below(root) == []
    assert (tree / "data.txt").read_text() == "orig\n"


def test_a_second_tree_replaces_the_first_and_keeps_src_shared(tmp_path: Path, tree: Path) -> None:
    """A pooled container's next run: release keeping the shared mount, show another tree, see only it."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.py").write_text("B = 1\n")
    root = container_dir(tmp_path / "c", treemount.dir_prefix())
    src = root / "src"
    try:
        treemount.show(tree, src, root / "stage")
        treemount.release(src, keep_shared=True)
        assert treemount.is_shared(src) and sorted(os.listdir(src)) == []
        treemount.show(other, src, root / "stage")
        assert sorted(os.listdir(src)) == ["b.py"]
    finally:
        treemount.release(src)


def test_remove_dir_never_deletes_through_a_mounted_tree(tmp_path: Path, tree: Path) -> None:
    """Removing a container's dir with its tree still shown unmounts first; the tree's files all stay."""
    root = container_dir(tmp_path / "c", treemount.dir_prefix())
    treemount.show(tree, root / "src", root / "stage")
    treemount.remove_dir(root)
    assert not root.exists() and mounted_below(root) == []
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == ["data.txt", "pkg", "pkg/a.py"]


# Serial: the SIGKILLed child's mounts are a dead process's, which any concurrent `gate run` sweeps at its
# start (sweep_dead_workers), and then this sweep finds nothing to count.
@pytest.mark.serial
def test_a_killed_processs_mounts_are_swept_and_a_live_ones_are_not(tmp_path: Path, tree: Path) -> None:
    """sweep_mounts releases and removes the dirs of a SIGKILLed process, and leaves this live one's."""
    parent = tmp_path / "c"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from pathlib import Path
                from worker.host import treemount
                root = Path({str(parent)!r}) / (treemount.dir_prefix() + "dead")
                (root / "src").mkdir(parents=True); (root / "stage").mkdir()
                assert treemount.make_shared(root / "src")
                treemount.show(Path({str(tree)!r}), root / "src", root / "stage")
                print(root, flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        dead_root = Path(child.stdout.readline().strip())
        assert mounted_below(dead_root), "the child mounted nothing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    live_root = container_dir(parent, treemount.dir_prefix())
    try:
        treemount.show(tree, live_root / "src", live_root / "stage")

        def alive(pid: int) -> bool:
            return pid != child.pid

        assert treemount.sweep_mounts(alive) == 1
        assert not dead_root.exists() and mounted_below(dead_root) == []
        assert (live_root / "src" / "data.txt").read_text() == "orig\n"
        assert (tree / "data.txt").read_text() == "orig\n"
    finally:
        treemount.remove_dir(live_root)
