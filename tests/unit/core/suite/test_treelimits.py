"""gate.core.suite.treelimits: whether a patched tree fits the sandbox's work space, file size and file count."""

from __future__ import annotations

from gate.core.suite.treelimits import MIB, PAGE, TreeSize, refusal, tree_size
from gate.core.suite.trial import Limits


def test_small_files_take_whole_pages_and_short_links_none() -> None:
    """Each file takes whole 4 KiB pages of tmpfs (measured), an empty one none; a short link target none."""
    size = tree_size({"a": 1, "b": PAGE, "c": PAGE + 1, "d": 0}, {"l": "a", "long": "x" * 200})
    assert size == TreeSize(entries=6, footprint=(1 + 1 + 2 + 0 + 1) * PAGE, largest=("c", PAGE + 1))


def test_a_tree_that_fits_is_not_refused() -> None:
    """A tree within every limit gets no refusal, up to exactly 3/4 of the work space."""
    limits = Limits(tmpfs_mb=64)
    assert refusal(TreeSize(entries=10, footprint=48 * MIB, largest=("a", MIB)), limits) is None
    assert refusal(TreeSize(entries=0, footprint=0), limits) is None


def test_a_tree_over_three_quarters_of_the_work_space_is_refused_naming_tmpfs_mb() -> None:
    """Past 3/4 of tmpfs_mb (the rest is for the probe's writes) the refusal names the space and how to raise it."""
    why = refusal(TreeSize(entries=10, footprint=int(74.2 * MIB), largest=("a", MIB)), Limits(tmpfs_mb=64))
    assert why is not None and "\n" not in why
    assert why.startswith("tree is 74.2 MB")
    assert "over 48 MB: 3/4 of the sandbox's 64 MB work space" in why
    assert why.endswith("exclude files ([suite] exclude, .gitignore) or raise [suite.limits] tmpfs_mb")


def test_a_file_over_the_file_size_limit_is_refused_naming_it() -> None:
    """A file the copy could not write under RLIMIT_FSIZE is named, with file_size_mb to raise; at the limit it fits."""
    limits = Limits(file_size_mb=2, tmpfs_mb=1024)
    assert refusal(TreeSize(entries=1, footprint=2 * MIB, largest=("data/big.bin", 2 * MIB)), limits) is None
    why = refusal(TreeSize(entries=1, footprint=3 * MIB, largest=("data/big.bin", 3 * MIB)), limits)
    assert why == (
        "data/big.bin is 3.0 MB, over the sandbox's 2 MB file size limit; "
        "exclude it ([suite] exclude, .gitignore) or raise [suite.limits] file_size_mb"
    )


def test_a_tree_with_too_many_entries_is_refused_naming_tree_files() -> None:
    """More files and symlinks than tree_files is refused, naming the count and the limit."""
    why = refusal(TreeSize(entries=21, footprint=PAGE, largest=("a", 1)), Limits(tree_files=20))
    assert why == (
        "tree holds 21 files and symlinks, over the sandbox's limit of 20; "
        "exclude files ([suite] exclude, .gitignore) or raise [suite.limits] tree_files"
    )
