"""The snapshot trials run from: the patched tree copied once per run (and digested as copied),
plus the sealed fixture bytes by digest. Trials run from the snapshot, so an edit to the work tree
during a run cannot reach them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from gate.core.errors import SandboxError
from gate.io.fixtures import seal_tree, tree_files

SKIP_IN_TREE = frozenset({".git"})


class LocalInputs:
    """A snapshot of the patched tree (digested as copied) and the sealed fixture bytes by digest.

    Trials run from the snapshot, so an edit to the work tree during a run cannot reach them.
    """

    def __init__(self, workdir: Path, fixtures: Mapping[str, bytes]) -> None:
        tree_files(workdir, skip_dirs=SKIP_IN_TREE)  # refuses symlinks and specials, naming the workdir
        self._tmp = Path(tempfile.mkdtemp(prefix="probegate-tree-"))
        self.snapshot = self._tmp / "tree"
        shutil.copytree(workdir, self.snapshot, ignore=shutil.ignore_patterns(*SKIP_IN_TREE))
        world_readable(self._tmp)
        self.tree_digest = seal_tree(self.snapshot).digest
        self.fixtures: dict[str, bytes] = dict(fixtures)

    def tree_dir(self, digest: str) -> Path:
        if digest != self.tree_digest:
            raise SandboxError(f"no tree with digest {digest[:16]} (have {self.tree_digest[:16]})")
        return self.snapshot

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


def world_readable(root: Path) -> None:
    """The sandbox runs as an unprivileged user: make the snapshot readable whatever the umask."""
    for dirpath, _, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            os.chmod(path, 0o644 | (os.stat(path).st_mode & 0o111))
