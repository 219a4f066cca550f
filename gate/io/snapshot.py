"""The snapshot trials run from: the patched tree (as `gate.io.treeselect` selects it) copied once
per run and digested as copied, plus the sealed fixture bytes by digest. Trials run from the
snapshot, so an edit to the work tree during a run cannot reach them.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from gate.core.errors import SandboxError, UsageError
from gate.core.suite.trial import SANDBOX_UID, Limits
from gate.io.patchedtree import PatchedTree, check_fits, copy_tree, laid_out, read_patched_tree, seal_patched
from gate.io.treeselect import WHOLE_TREE, TreeSelection


class LocalInputs:
    """A snapshot of the patched tree (digested as copied) and the sealed fixture bytes by digest.

    `tree` is the patched tree already read (the runner reads it to check its size before any
    container starts); without it, `selection` picks it from `workdir`. With `limits`, a tree the
    sandbox cannot lay out is refused (TreeTooLargeError) before it is copied.
    """

    def __init__(
        self,
        workdir: Path,
        fixtures: Mapping[str, bytes],
        *,
        selection: TreeSelection = WHOLE_TREE,
        tree: PatchedTree | None = None,
        overrides: Mapping[str, bytes] | None = None,
        limits: Limits | None = None,
    ) -> None:
        found = tree if tree is not None else read_patched_tree(workdir, selection)
        if limits is not None:
            check_fits(found, limits, where=workdir)
        self._tmp = Path(tempfile.mkdtemp(prefix="probegate-tree-"))
        try:
            self.snapshot = self._tmp / "tree"
            copy_tree(found, self.snapshot)
            for rel, data in (overrides or {}).items():
                # The base's oracle files (its probe entry) laid over the patch's: trials run those.
                lay_over(self.snapshot, rel, data)
            world_readable(self.snapshot)  # _tmp stays mkdtemp's 0700: nobody else reaches the tree
            copied = laid_out(self.snapshot)  # what trials will see, checked again
            if limits is not None:
                check_fits(copied, limits, where=workdir)
            self.tree_digest = seal_patched(copied).digest
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        self.fixtures: dict[str, bytes] = dict(fixtures)
        # Other snapshots this one serves too (a paired property's base tree), by digest; theirs to close.
        self.others: dict[str, Path] = {}

    def serve(self, other: LocalInputs) -> None:
        """Serve `other`'s tree beside this one, so one wave holds trials of both (the paired rule)."""
        self.others[other.tree_digest] = other.snapshot
        self.fixtures.update(other.fixtures)

    def trees(self) -> dict[str, Path]:
        """Every tree this serves, by digest: its own first."""
        return {self.tree_digest: self.snapshot, **self.others}

    def tree_dir(self, digest: str) -> Path:
        found = self.trees().get(digest)
        if found is None:
            raise SandboxError(f"no tree with digest {digest[:16]} (have {self.tree_digest[:16]})")
        return found

    def fixture_bytes(self, digest: str) -> bytes:
        try:
            return self.fixtures[digest]
        except KeyError:
            raise SandboxError(f"no fixture blob with digest {digest[:16]}") from None

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> LocalInputs:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def tree_digest(workdir: Path, selection: TreeSelection = WHOLE_TREE) -> str:
    """The digest a run's snapshot of `workdir` gets (before the base's probe entry is laid over):
    the entries `selection` picks, read in place without following any link."""
    return seal_patched(read_patched_tree(workdir, selection)).digest


def check_outside_tree(path: Path, workdir: Path, selection: TreeSelection, *, field: str) -> None:
    """Refuse an output of the gate that would land in the patched tree unless the suite leaves it out
    of the tree (`outputs`, `exclude`, the card): else writing it would change what `accept` recomputes."""
    try:
        rel = path.resolve().relative_to(workdir.resolve()).as_posix()
    except ValueError:
        return
    if not selection.left_out(rel):
        raise UsageError(
            f"lies inside the patched tree ({rel}); name it in [suite] outputs so the tree's digest leaves it out",
            file=str(path),
            field=field,
        )


def lay_over(root: Path, rel: str, data: bytes) -> None:
    """Write `data` at `rel` in a private snapshot, replacing whatever the patch put in the way (a link,
    a file where a folder belongs) instead of writing through it."""
    folder = root
    *parents, name = rel.split("/")
    for part in parents:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        folder.mkdir(exist_ok=True)
    target = folder / name
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    target.write_bytes(data)


def world_readable(root: Path) -> None:
    """The sandbox runs as an unprivileged user: make the snapshot readable whatever the umask.
    Links are not chmod'ed (chmod would follow them, and a dangling one has nothing to chmod).

    When we are root, every entry is also given to the sandbox's user: then overlay mode can use
    the snapshot itself as its read-only lower (a copy-up keeps a file's owner, and only the sandbox's
    own uid is mapped in its user namespace; worker/box/overlay.py). Keep `root`'s parent private:
    a host process of that uid must not reach files it now owns."""
    owner = SANDBOX_UID if os.geteuid() == 0 else None
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        if owner is not None:
            os.lchown(dirpath, owner, owner)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if not stat.S_ISLNK(mode):
                os.chmod(path, 0o644 | (mode & 0o111))
            if owner is not None:
                os.lchown(path, owner, owner)
