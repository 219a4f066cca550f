"""The snapshot trials run from: the patched tree copied once per run (and digested as copied),
plus the sealed fixture bytes by digest. Trials run from the snapshot, so an edit to the work tree
during a run cannot reach them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from gate.core.errors import SandboxError, UsageError
from gate.io.fixtures import matches_any, seal_tree, tree_files

SKIP_IN_TREE = frozenset({".git"})


class LocalInputs:
    """A snapshot of the patched tree (digested as copied) and the sealed fixture bytes by digest.

    Trials run from the snapshot, so an edit to the work tree during a run cannot reach them.
    """

    def __init__(
        self,
        workdir: Path,
        fixtures: Mapping[str, bytes],
        *,
        outputs: Sequence[str] = (),
        overrides: Mapping[str, bytes] | None = None,
    ) -> None:
        tree_files(workdir, skip_dirs=SKIP_IN_TREE, exclude=outputs)  # refuses symlinks and specials
        self._tmp = Path(tempfile.mkdtemp(prefix="probegate-tree-"))
        self.snapshot = self._tmp / "tree"
        shutil.copytree(workdir, self.snapshot, ignore=_ignored(workdir, outputs))
        for rel, data in (overrides or {}).items():
            # The base's oracle files (its probe entry) laid over the patch's: trials run those.
            target = self.snapshot / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            target.write_bytes(data)
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


def tree_digest(workdir: Path, outputs: Sequence[str] = ()) -> str:
    """The digest a run's snapshot of `workdir` gets: every file but `.git` and the gate's outputs."""
    return seal_tree(workdir, skip_dirs=SKIP_IN_TREE, exclude=outputs).digest


def check_outside_tree(path: Path, workdir: Path, outputs: Sequence[str], *, field: str) -> None:
    """Refuse an output of the gate that would land in the patched tree unless the suite's `outputs`
    leave it out of the tree's digest (else writing the card would change what `accept` recomputes)."""
    try:
        rel = path.resolve().relative_to(workdir.resolve()).as_posix()
    except ValueError:
        return
    if not matches_any(rel, outputs):
        raise UsageError(
            f"lies inside the patched tree ({rel}); name it in [suite] outputs so the tree's digest leaves it out",
            file=str(path),
            field=field,
        )


def _ignored(workdir: Path, outputs: Sequence[str]) -> Callable[[str, list[str]], set[str]]:
    """copytree's ignore: `.git`, and files matching the suite's `outputs` globs (the card, the books)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).relative_to(workdir)
        return {
            name
            for name in names
            if name in SKIP_IN_TREE or matches_any((rel / name).as_posix(), outputs)
        }

    return ignore


def world_readable(root: Path) -> None:
    """The sandbox runs as an unprivileged user: make the snapshot readable whatever the umask."""
    for dirpath, _, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            os.chmod(path, 0o644 | (os.stat(path).st_mode & 0o111))
