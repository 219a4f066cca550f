"""Write detection's building blocks, on real files: a laid-out template reports exactly what a
snapshot of it finds, and diffs name every created, modified, re-moded and deleted path."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.box.fsdiff import Template, diff, snapshot, wipe

NAMES = st.text(alphabet="abcdef_", min_size=1, max_size=6)
TREES = st.recursive(
    st.binary(max_size=64),
    lambda children: st.dictionaries(NAMES, children, min_size=1, max_size=4),
    max_leaves=12,
)
MODES = st.sampled_from([0o644, 0o600, 0o755, 0o444])


def build(root: Path, tree: dict, modes: list[int]) -> None:
    for index, (name, node) in enumerate(sorted(tree.items())):
        path = root / name
        if isinstance(node, dict):
            path.mkdir()
            build(path, node, modes)
        else:
            path.write_bytes(node)
            path.chmod(modes[index % len(modes)])


@settings(max_examples=60, deadline=None)
@given(tree=st.dictionaries(NAMES, TREES, max_size=5), modes=st.lists(MODES, min_size=1, max_size=4))
def test_laid_out_template_matches_its_snapshot(tree: dict, modes: list[int]) -> None:
    """What Template.lay_out says it made (and Template.signatures says without making it) is exactly
    what a snapshot of the result finds, bytes alike."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "src", Path(tmp) / "dst"
        src.mkdir()
        dst.mkdir()
        build(src, tree, modes)
        template = Template(str(src))
        said = template.lay_out(str(dst))
        assert said == snapshot([str(dst)]) == template.signatures(str(dst))
        for path in src.rglob("*"):
            twin = dst / path.relative_to(src)
            assert twin.is_dir() if path.is_dir() else twin.read_bytes() == path.read_bytes()
            assert path.stat().st_mode == twin.stat().st_mode
            if path.is_file():
                assert path.stat().st_mtime_ns == twin.stat().st_mtime_ns


def test_a_template_lays_out_again_after_a_wipe(tmp_path: Path) -> None:
    """The same template serves trial after trial: wipe, lay out, and the snapshot is unchanged."""
    src, work = tmp_path / "src", tmp_path / "work"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("x = 1\n")
    (src / "probe.py").write_text("print(1)\n")
    work.mkdir()
    template = Template(str(src))
    first = template.lay_out(str(work))
    (work / "pkg" / "m.py").write_text("x = 2\n")  # a trial's write
    wipe(str(work))
    assert template.lay_out(str(work)) == first == snapshot([str(work)])


def test_diff_names_every_kind_of_change(tmp_path: Path) -> None:
    """Created, modified (content or mode) and deleted paths are all reported, sorted; untouched ones are not."""
    for name in ("keep", "edit", "chmod", "gone"):
        (tmp_path / name).write_text(name)
    before = snapshot([str(tmp_path)])
    (tmp_path / "edit").write_text("edited")
    (tmp_path / "chmod").chmod(0o600)
    (tmp_path / "gone").unlink()
    (tmp_path / "new").write_text("new")
    changes = diff(before, snapshot([str(tmp_path)]))
    assert changes == [
        {"path": str(tmp_path / "chmod"), "change": "modified"},
        {"path": str(tmp_path / "edit"), "change": "modified"},
        {"path": str(tmp_path / "gone"), "change": "deleted"},
        {"path": str(tmp_path / "new"), "change": "created"},
    ]


def test_rewriting_a_file_with_its_mtime_restored_is_still_seen(tmp_path: Path) -> None:
    """A write that puts the old size and mtime back is caught: files are compared by content digest."""
    path = tmp_path / "f"
    path.write_text("aaaa")
    st = path.stat()
    before = snapshot([str(tmp_path)])
    path.write_text("bbbb")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert diff(before, snapshot([str(tmp_path)])) == [{"path": str(path), "change": "modified"}]


def test_links_are_laid_out_as_links_and_replacing_one_is_a_write(tmp_path: Path) -> None:
    """A tree's symlinks (to a file, to a folder) are laid out as links, listed once (a linked folder is
    not walked), and a probe that replaces a link with a file, or retargets it, is seen writing."""
    src, work = tmp_path / "src", tmp_path / "work"
    (src / "docs" / "v2").mkdir(parents=True)
    (src / "docs" / "v2" / "index.md").write_text("# v2\n")
    (src / "real.py").write_text("X = 1\n")
    os.symlink("real.py", src / "link.py")
    os.symlink("v2", src / "docs" / "latest")
    work.mkdir()
    said = Template(str(src)).lay_out(str(work))
    assert os.readlink(work / "link.py") == "real.py" and os.readlink(work / "docs" / "latest") == "v2"
    assert said == snapshot([str(work)])
    assert str(work / "docs" / "latest" / "index.md") not in said
    (work / "link.py").unlink()
    (work / "link.py").write_text("X = 1\n")  # the target's very bytes, but no longer a link
    (work / "docs" / "latest").unlink()
    os.symlink("v1", work / "docs" / "latest")
    changes = diff(said, snapshot([str(work)]))
    assert changes == [
        {"path": str(work / "docs" / "latest"), "change": "modified"},
        {"path": str(work / "link.py"), "change": "modified"},
    ]
