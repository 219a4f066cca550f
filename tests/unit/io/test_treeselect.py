"""gate.io.treeselect: the patched tree is what git tracks plus untracked files it does not ignore (or
the suite's globs outside git), minus the suite's exclude globs and the gate's own outputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.git_trees import git, isolated_git, repo, write

from gate.core.errors import FixtureTreeError, UsageError
from gate.core.suite.suite import Suite, SuiteConfig
from gate.io.patchedtree import read_patched_tree
from gate.io.snapshot import tree_digest
from gate.io.treeselect import TreeSelection, in_git, select_paths, tree_selection

__all__ = ["isolated_git"]  # the autouse fixture, imported so pytest finds it


def test_the_git_tree_is_tracked_plus_untracked_files_git_does_not_ignore(tmp_path: Path) -> None:
    """Tracked and untracked-unignored files are selected, ignored ones (.venv, node_modules) are not;
    symlinks are entries of their own (a linked folder is not walked); a tracked file deleted from disk
    is still in the index, and absent from the tree as read."""
    root = repo(
        tmp_path / "r",
        {".gitignore": ".venv/\nnode_modules/\n", "app.py": "", "gone.py": "", "docs/v2/index.md": ""},
        {"docs/latest": "v2", "link.py": "app.py"},
    )
    write(root, {"new.py": "", "node_modules/x/index.js": "", ".venv/lib/site.py": ""})
    os.symlink("lib", root / ".venv" / "lib64")
    (root / "gone.py").unlink()
    selected = [".gitignore", "app.py", "docs/latest", "docs/v2/index.md", "gone.py", "link.py", "new.py"]
    assert select_paths(root) == selected
    tree = read_patched_tree(root)
    assert sorted([*tree.files, *tree.links]) == [path for path in selected if path != "gone.py"]


def test_an_untracked_file_is_in_the_digest_so_it_cannot_hide_code(tmp_path: Path) -> None:
    """A file the patch leaves untracked (but not ignored) changes the tree's digest like a tracked one."""
    root = repo(tmp_path / "r", {"app.py": "X = 1\n"})
    before = tree_digest(root)
    write(root, {"sneaky.py": "import os\n"})
    assert tree_digest(root) != before


def test_ignored_files_are_not_in_the_digest(tmp_path: Path) -> None:
    """Files git ignores change nothing: they are neither copied into the sandbox nor digested."""
    root = repo(tmp_path / "r", {".gitignore": "node_modules/\n*.log\n", "app.py": ""})
    before = tree_digest(root)
    write(root, {"node_modules/big.js": "x" * 10_000, "run.log": "noise"})
    assert tree_digest(root) == before


def test_a_patch_that_ignores_a_tracked_file_hides_nothing(tmp_path: Path) -> None:
    """The patch controls .gitignore, but ignoring never drops a tracked file: it stays in the tree
    (and the digest); only untracked files, which a merge does not carry, can be ignored."""
    root = repo(tmp_path / "r", {"app.py": "X = 1\n", "evil.py": "import os\n"})
    write(root, {".gitignore": "evil.py\n"})
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "the patch ignores a tracked file")
    assert "evil.py" in select_paths(root)


def test_a_subfolder_of_a_repository_selects_only_beneath_it(tmp_path: Path) -> None:
    """With --workdir a subfolder, paths are relative to it and nothing outside it is selected."""
    root = repo(tmp_path / "r", {"gate.toml": "", "app/main.py": "", "app/pkg/mod.py": "", "other/x.py": ""})
    write(root, {"app/untracked.py": ""})
    assert select_paths(root / "app") == ["main.py", "pkg/mod.py", "untracked.py"]


def test_a_git_submodule_is_refused_in_one_line(tmp_path: Path) -> None:
    """A submodule (a gitlink in the index) cannot be part of the tree: refused naming it."""
    sub = repo(tmp_path / "sub", {"f.py": ""})
    root = repo(tmp_path / "r", {"app.py": ""})
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/sub")
    with pytest.raises(FixtureTreeError, match=r"vendor/sub is a git submodule") as caught:
        select_paths(root)
    assert "\n" not in str(caught.value) and caught.value.file == str(root)
    assert "vendor/sub" not in select_paths(root, TreeSelection(exclude=("vendor",)))


def test_an_untracked_nested_repository_is_refused_naming_it(tmp_path: Path) -> None:
    """A repository inside the tree (which git lists as one folder) is refused rather than silently dropped."""
    root = repo(tmp_path / "r", {"app.py": ""})
    repo(root / "nested", {"n.py": ""})
    with pytest.raises(FixtureTreeError, match=r"nested/ is a git repository inside the tree"):
        select_paths(root)


def test_exclude_and_outputs_leave_out_files_and_whole_folders(tmp_path: Path) -> None:
    """A path is left out when it, or a folder it lies in, matches an exclude or outputs glob (in git too)."""
    root = repo(tmp_path / "r", {"app.py": "", "data/big.bin": ""})
    write(root, {"out/card.json": "", "docs/a.md": ""})  # untracked: the gate wrote them
    selection = TreeSelection(exclude=("data",), outputs=("out/*", "*.md"))
    assert select_paths(root, selection) == ["app.py"]


@pytest.mark.parametrize("rel", ["out/card.json", "out/evidence/hook.py", "notes.md"])
def test_a_tracked_file_under_the_gates_outputs_is_refused(tmp_path: Path, rel: str) -> None:
    """A patch that force-adds code under an output path (left out of the sandbox and the digest, yet
    merged) is refused naming the file, instead of slipping past the probe."""
    root = repo(tmp_path / "r", {"app.py": "try:\n    import hook\nexcept ImportError:\n    pass\n"})
    write(root, {rel: "import os; os.system('true')\n"})
    git(root, "add", "-f", rel)
    git(root, "commit", "-qm", "the patch hides a hook in the gate's outputs")
    selection = TreeSelection(outputs=("out", "*.md"))
    with pytest.raises(FixtureTreeError, match=rf"{rel} is tracked by git but lies in the gate's outputs") as caught:
        select_paths(root, selection)
    assert "\n" not in str(caught.value) and caught.value.exit_code == 65


def test_outside_git_include_and_exclude_globs_pick_the_tree_and_dot_git_is_skipped(tmp_path: Path) -> None:
    """Outside a repository the suite's include globs pick files (and whole folders), exclude drops them,
    and `.git` is never part of the tree."""
    root = write(tmp_path / "t", {"src/a.py": "", "src/b.txt": "", "probe.py": "", "junk/x": "", "sub/.git/HEAD": ""})
    os.symlink("src/a.py", root / "alias.py")
    assert not in_git(root)
    assert select_paths(root) == ["alias.py", "junk/x", "probe.py", "src/a.py", "src/b.txt"]
    selection = TreeSelection(include=("src", "*.py"), exclude=("*.txt",))
    assert select_paths(root, selection) == ["alias.py", "probe.py", "src/a.py"]


def test_the_suites_card_inside_the_tree_is_an_output(tmp_path: Path) -> None:
    """`[suite] card`, resolved from gate.toml's folder, is left out of the tree when it lies inside it,
    even when its name holds glob characters, and so are the evidence folder, the flake files, the journal and
    the signature envelope beside it."""
    config = SuiteConfig(card="app/cards/[run]*.json", outputs=("books/*",))
    # Read from a checkout of the base (as with --base): the card is placed from the work tree's gate.toml.
    suite = Suite(path=tmp_path / "base" / "gate.toml", root=tmp_path / "base", sha256="", config=config, properties=())
    selection = tree_selection(suite, tmp_path / "app", suite_file=tmp_path / "gate.toml")
    assert selection.outputs == (
        "books/*",
        "cards/evidence",
        "cards/freeze-proposal.json",
        "cards/repair-task.md",
        "cards/lift-proposal.md",
        "cards/[[]run][*].json",
        "cards/[[]run][*].json.dsse.json",  # the card's signature envelope (gate.io.cardsig)
    )
    assert selection.left_out("cards/[run]*.json.dsse.json") and not selection.left_out("cards/run1.json.dsse.json")
    assert selection.left_out("cards/[run]*.json") and not selection.left_out("cards/run1.json")
    assert selection.left_out("cards/evidence/" + "a" * 64 + ".json") and not selection.left_out("evidence/x.json")
    outside = tree_selection(suite, tmp_path / "elsewhere", suite_file=tmp_path / "gate.toml")
    assert outside.outputs == ("books/*",)


def test_a_file_name_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    """The seal hashes UTF-8 names, so a name git or the walk hands over undecodable is refused naming it."""
    root = repo(tmp_path / "r", {"app.py": ""})
    (root / os.fsdecode(b"bad-\xff.py")).write_text("")
    with pytest.raises(FixtureTreeError, match="is not UTF-8; rename it") as caught:
        select_paths(root)
    assert "bad-\\xff.py" in str(caught.value)  # shown escaped, on one line


def test_a_git_failure_is_one_usage_line(tmp_path: Path) -> None:
    """A `.git` git cannot read (here a gitdir file pointing nowhere) is one UsageError line, not a traceback."""
    root = write(tmp_path / "r", {"app.py": "", ".git": "gitdir: /nonexistent/probegate\n"})
    with pytest.raises(UsageError, match=r"git ls-files failed: fatal: ") as caught:
        select_paths(root)
    assert "\n" not in str(caught.value)


def test_git_variables_of_another_repository_do_not_change_the_selection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIT_DIR / GIT_INDEX_FILE set by a hook or a CI step cannot point the selection at another repository."""
    root = repo(tmp_path / "r", {"app.py": ""})
    other = repo(tmp_path / "other", {"elsewhere.py": ""})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    assert select_paths(root) == ["app.py"]
