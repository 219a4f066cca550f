"""gate.io.patchedtree and the snapshot: in-tree symlinks travel as symlinks and are digested; links
that lead out of the tree are refused naming them; no link is ever followed on the host."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from gate.core.errors import FixtureTreeError, InputMissingError, TreeTooLargeError
from gate.core.suite.trial import Limits
from gate.io.fixtures import seal_tree
from gate.io.patchedtree import copy_tree, laid_out, link_problem, read_patched_tree, scan_tree, seal_patched
from gate.io.snapshot import LocalInputs, lay_over, tree_digest, world_readable
from gate.io.treeselect import select_paths

from .git_trees import isolated_git, repo, write

__all__ = ["isolated_git"]  # the autouse fixture, imported so pytest finds it

SECRET = "host-secret-4f1c"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the tree holding a secret the tree must never reach on the host."""
    return write(tmp_path / "outside", {"mod.py": f"KEY = '{SECRET}'\n", "secret": SECRET})


def linked_repo(root: Path) -> Path:
    return repo(
        root,
        {"real.py": "X = 1\n", "docs/v2/index.md": "# v2\n", "probe.py": "import link\n"},
        {"link.py": "real.py", "docs/latest": "v2"},
    )


def test_in_tree_symlinks_travel_as_links_and_a_linked_folder_is_listed_once(tmp_path: Path) -> None:
    """`link.py -> real.py` and `docs/latest -> v2` are entries of the tree; v2's files are listed once."""
    tree = read_patched_tree(linked_repo(tmp_path / "r"))
    assert tree.links == {"docs/latest": "v2", "link.py": "real.py"}
    assert sorted(tree.files) == ["docs/v2/index.md", "probe.py", "real.py"]


def test_the_snapshot_keeps_links_as_links_and_digests_as_accept_recomputes(tmp_path: Path) -> None:
    """LocalInputs copies links as links (no file copied through them) and its digest is tree_digest's."""
    root = linked_repo(tmp_path / "r")
    with LocalInputs(root, {}) as inputs:
        snap = inputs.snapshot
        assert os.readlink(snap / "link.py") == "real.py" and os.readlink(snap / "docs" / "latest") == "v2"
        assert (snap / "link.py").read_text() == "X = 1\n"
        assert inputs.tree_digest == tree_digest(root)


def test_retargeting_a_link_changes_the_digest(tmp_path: Path) -> None:
    """A link's target is part of the digest: pointing `docs/latest` at another folder is another tree."""
    root = linked_repo(tmp_path / "r")
    write(root, {"docs/v1/index.md": "# v1\n"})
    before = tree_digest(root)
    (root / "docs" / "latest").unlink()
    os.symlink("v1", root / "docs" / "latest")
    assert tree_digest(root) != before


def test_a_tracked_file_made_a_link_to_another_file_gets_another_digest(tmp_path: Path) -> None:
    """A patch that turns `a.py` into a symlink to `real.py` does not seal like a plain `a.py` holding
    real.py's bytes, nor like one holding the name `real.py`."""
    root = repo(tmp_path / "r", {"real.py": "X = 1\n", "a.py": "X = 1\n"})
    plain_copy = tree_digest(root)
    (root / "a.py").write_text("real.py")
    plain_name = tree_digest(root)
    (root / "a.py").unlink()
    os.symlink("real.py", root / "a.py")
    assert tree_digest(root) not in (plain_copy, plain_name)


def test_a_tree_of_text_files_keeps_the_fixture_recipes_digest(tmp_path: Path) -> None:
    """Without links or NUL bytes the patched tree's digest is seal_tree's, as before symlinks were allowed."""
    root = write(tmp_path / "t", {"probe.py": "print(1)\n", "pkg/mod.py": "X = 1\n"})
    assert tree_digest(root) == seal_tree(root).digest


@pytest.mark.parametrize(
    ("link", "target", "why"),
    [
        ("passwd", "/etc/passwd", "is absolute"),
        ("docs/secret", "../../secret", "points outside the tree"),
        ("up", "..", "points outside the tree"),
        ("x", "a/up/..", "climbs (..) out of a/up, itself a link"),
    ],
)
def test_a_link_leading_out_of_the_tree_is_refused_naming_it(tmp_path: Path, link: str, target: str, why: str) -> None:
    """An absolute link, one that climbs out with `..`, or one that climbs out through another link of the
    tree is one FixtureTreeError line naming the link, its target and the work folder."""
    root = repo(tmp_path / "r", {"a/file.py": "", "docs/x.md": ""}, {"a/up": "..", link: target})
    with pytest.raises(FixtureTreeError) as caught:
        read_patched_tree(root)
    assert str(caught.value) == (
        f"{root}: symlink {link} -> {target} {why}; the patched tree may only hold links that stay inside it"
    )


def test_lexical_link_rules() -> None:
    """A link may point at its own folder, a sibling or the root; not above the root, nor climb out through a link."""
    links = {"a/up": "..", "d/latest": "v2"}
    assert link_problem("d/latest", "v2", links) == ""
    assert link_problem("a/up", "..", links) == ""
    assert link_problem("a/here", ".", links) == ""
    assert link_problem("x", "d/latest/../v1", links) == "climbs (..) out of d/latest, itself a link"
    assert link_problem("x", "d/./v2/../v1", links) == ""
    assert link_problem("a/b", "../../x", links) == "points outside the tree"
    assert link_problem("x", "//etc", links) == "is absolute"


def test_a_folder_swapped_for_a_link_after_selection_is_never_followed(tmp_path: Path, outside: Path) -> None:
    """A tracked folder replaced by a link to a folder outside the tree after the paths were selected: the
    scan sees the link (refused as escaping), never the files behind it."""
    root = repo(tmp_path / "r", {"pkg/mod.py": "KEY = None\n", "probe.py": ""})
    paths = select_paths(root)
    (root / "pkg" / "mod.py").unlink()
    (root / "pkg").rmdir()
    os.symlink(outside, root / "pkg")
    tree = scan_tree(root, paths)
    assert "pkg/mod.py" not in tree.files  # beneath a link: absent, as git sees it
    with pytest.raises(FixtureTreeError, match=r"symlink pkg -> .* is absolute"):
        scan_tree(root, [*paths, "pkg"])


@pytest.mark.parametrize("swap", ["folder", "file"])
def test_an_entry_swapped_for_a_link_after_the_scan_is_never_read_through(
    tmp_path: Path, outside: Path, swap: str
) -> None:
    """Between the scan and the read (seal or copy), a file or its folder swapped for a link to the host's
    files makes the read fail; the secret behind the link is never read into a seal or a snapshot."""
    root = repo(tmp_path / "r", {"pkg/mod.py": "KEY = None\n"})
    tree = read_patched_tree(root)
    if swap == "folder":
        (root / "pkg" / "mod.py").unlink()
        (root / "pkg").rmdir()
        os.symlink(outside, root / "pkg")
    else:
        (root / "pkg" / "mod.py").unlink()
        os.symlink(outside / "mod.py", root / "pkg" / "mod.py")
    with pytest.raises(InputMissingError):
        seal_patched(tree)
    with pytest.raises(InputMissingError):
        copy_tree(tree, tmp_path / "copy")
    copied = [p.read_text() for p in (tmp_path / "copy").rglob("*") if p.is_file() and not p.is_symlink()]
    assert not any(SECRET in text for text in copied)


def test_a_special_file_is_refused(tmp_path: Path) -> None:
    """A fifo (or device) in the tree cannot be copied or sealed: refused naming it."""
    root = write(tmp_path / "t", {"probe.py": ""})
    os.mkfifo(root / "pipe")
    with pytest.raises(FixtureTreeError, match="pipe is not a regular file or a symlink"):
        read_patched_tree(root)


def test_the_probe_entry_is_laid_over_a_linked_folder_not_written_through_it(tmp_path: Path) -> None:
    """The base's probe entry replaces a link the patch put on its way (here `tools -> other`) with a real
    folder, so the write never lands where the link points."""
    snap = write(tmp_path / "snap", {"other/probe.py": "patched\n"})
    os.symlink("other", snap / "tools")
    lay_over(snap, "tools/probe.py", b"base\n")
    assert (snap / "tools").is_dir() and not (snap / "tools").is_symlink()
    assert (snap / "tools" / "probe.py").read_bytes() == b"base\n"
    assert (snap / "other" / "probe.py").read_text() == "patched\n"


def test_world_readable_leaves_links_alone_even_dangling_ones(tmp_path: Path) -> None:
    """Making a snapshot readable does not chmod through links, nor fail on one whose target is absent."""
    root = write(tmp_path / "t", {"a.py": ""})
    (root / "a.py").chmod(0o600)
    os.symlink("missing.py", root / "dangling.py")
    world_readable(root)
    assert (root / "a.py").stat().st_mode & 0o777 == 0o644


def test_a_tree_too_large_is_refused_before_it_is_copied(tmp_path: Path) -> None:
    """With limits, LocalInputs refuses a tree over them in one line and leaves no snapshot behind."""
    root = write(tmp_path / "t", {f"f{i}.py": "" for i in range(5)})
    before = set(Path(tempfile.gettempdir()).glob("probegate-tree-*"))
    with pytest.raises(TreeTooLargeError, match=r"tree holds 5 files and symlinks, over the sandbox's limit of 4"):
        LocalInputs(root, {}, limits=Limits(tree_files=4))
    assert set(Path(tempfile.gettempdir()).glob("probegate-tree-*")) == before


def test_an_unpacked_copy_is_checked_like_the_work_tree(tmp_path: Path) -> None:
    """`laid_out` (a snapshot, an unpacked blob) sees every entry, links included, and refuses escaping ones."""
    root = write(tmp_path / "t", {"a.py": ""})
    os.symlink("a.py", root / "b.py")
    assert laid_out(root).links == {"b.py": "a.py"}
    os.symlink("../../etc", root / "c")
    with pytest.raises(FixtureTreeError, match=r"symlink c -> \.\./\.\./etc points outside the tree"):
        laid_out(root)


def test_a_git_tree_snapshot_leaves_out_what_git_ignores(tmp_path: Path) -> None:
    """The run's snapshot holds git's selection: an ignored folder (with its own links) is not copied."""
    root = repo(tmp_path / "r", {".gitignore": ".venv/\n", "app.py": ""})
    write(root, {".venv/lib/site.py": ""})
    os.symlink("lib", root / ".venv" / "lib64")
    os.symlink("/usr/bin/python3", root / ".venv" / "python")
    # The links under .venv (one leading out of the tree) are ignored, so never copied nor refused.
    with LocalInputs(root, {}) as inputs:
        assert sorted(p.name for p in inputs.snapshot.iterdir()) == [".gitignore", "app.py"]
