"""Whether a patched tree fits the sandbox before any container starts: each trial's copy of it is
written into the /work tmpfs (`tmpfs_mb`) under RLIMIT_FSIZE (`file_size_mb`), and the tree may hold
at most `tree_files` files and symlinks. A tree that cannot fit is refused in one line naming the limit
and how to raise it, instead of failing late in every container.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from gate.core.suite.trial import Limits

PAGE = 4096  # tmpfs charges whole pages: a one-byte file takes 4 KiB of the work space (measured)
INLINE_LINK = 128  # tmpfs keeps a link target shorter than this in the inode, a longer one in a page
MIB = 1 << 20
# The tree may take this share of the work space; the rest is for the probe's own writes.
TREE_SHARE = Fraction(3, 4)
HOW = "exclude {what} ([suite] exclude, .gitignore) or raise [suite.limits] {limit}"


@dataclass(frozen=True)
class TreeSize:
    """What a tree asks of the sandbox: entries (files and symlinks), the work space its copy takes
    (bytes, in tmpfs pages) and its largest file (path, bytes), if any."""

    entries: int
    footprint: int
    largest: tuple[str, int] | None = None


def tree_size(files: Mapping[str, int], links: Mapping[str, str]) -> TreeSize:
    """The size of a tree of `files` (path → bytes) and `links` (path → target)."""
    pages = sum(-(-size // PAGE) for size in files.values())
    pages += sum(1 for target in links.values() if len(target.encode("utf-8")) >= INLINE_LINK)
    largest = max(files.items(), key=lambda item: (item[1], item[0]), default=None)
    return TreeSize(entries=len(files) + len(links), footprint=pages * PAGE, largest=largest)


def refusal(size: TreeSize, limits: Limits) -> str | None:
    """Why a tree of `size` cannot be laid out under `limits` (one line), or None when it fits."""
    if size.largest is not None and size.largest[1] > limits.file_size_mb * MIB:
        path, largest = size.largest
        return (
            f"{path} is {_mb(largest)} MB, over the sandbox's {limits.file_size_mb} MB file size limit; "
            + HOW.format(what="it", limit="file_size_mb")
        )
    budget = TREE_SHARE * limits.tmpfs_mb * MIB
    if size.footprint > budget:
        return (
            f"tree is {_mb(size.footprint)} MB (each file in whole 4 KiB pages), over {float(budget / MIB):g} MB: "
            f"3/4 of the sandbox's {limits.tmpfs_mb} MB work space, the rest left for the probe's writes; "
            + HOW.format(what="files", limit="tmpfs_mb")
        )
    if size.entries > limits.tree_files:
        return (
            f"tree holds {size.entries} files and symlinks, over the sandbox's limit of {limits.tree_files}; "
            + HOW.format(what="files", limit="tree_files")
        )
    return None


def _mb(size: int) -> str:
    return f"{size / MIB:.1f}"
