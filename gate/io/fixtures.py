"""The filesystem side of sealing: walk a tree (refusing what cannot be sealed), stream its files
into `gate.seal`, read and write seal files, verify a fixture tree, and read its clock.json.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from gate.core.errors import ConfigError, FixtureTreeError, InputMissingError, SealDriftError
from gate.core.seal import Seal, compute
from gate.core.suite import one_line
from gate.core.trial import ClockSpec
from gate.io.artifacts import write_atomic

CHUNK = 1 << 20
CLOCK_FILE = "clock.json"


def tree_files(root: Path, *, skip_dirs: frozenset[str] = frozenset()) -> list[str]:
    """Relative POSIX paths of every regular file under `root`; symlinks and specials are refused."""
    if not root.is_dir():
        raise InputMissingError("directory not found", file=str(root))
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if d not in skip_dirs]
        for name in [*dirnames, *filenames]:
            full = Path(dirpath, name)
            mode = full.lstat().st_mode
            rel = full.relative_to(root).as_posix()
            if stat.S_ISLNK(mode):
                raise FixtureTreeError(f"symlink {rel} cannot be sealed; replace it with the file", file=str(root))
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise FixtureTreeError(f"{rel} is not a regular file", file=str(root))
            found.append(rel)
    return found


def _reader(root: Path):
    def read(rel: str) -> Iterator[bytes]:
        with open(root / rel, "rb") as handle:
            while chunk := handle.read(CHUNK):
                yield chunk

    return read


def seal_tree(root: Path, *, skip_dirs: frozenset[str] = frozenset()) -> Seal:
    """Seal the tree at `root`, streaming each file in 1 MiB chunks."""
    return compute(tree_files(root, skip_dirs=skip_dirs), _reader(root))


def read_seal_file(path: Path) -> Seal:
    if not path.is_file():
        raise InputMissingError("seal file not found (make one with `gate seal DIR --write FILE`)", file=str(path))
    try:
        return Seal.from_text(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not a seal file: {exc}", file=str(path)) from None


def write_seal_file(path: Path, seal: Seal) -> None:
    write_atomic(path, seal.to_text().encode("utf-8"))


def verify(root: Path, expected: Seal, *, seal_file: str) -> Seal:
    """Seal `root` and compare with `expected`; raises SealDriftError naming the drifted files."""
    actual = seal_tree(root)
    if actual.digest != expected.digest:
        diff = expected.diff(actual)
        raise SealDriftError(
            f"fixture drift: tree {actual.digest[:16]} != seal {expected.digest[:16]} ({diff.describe()})",
            file=seal_file,
            changed=diff.files,
        )
    return actual


def read_clock(root: Path) -> ClockSpec:
    """The frozen instant for every probe, from `clock.json` at the fixture root."""
    path = root / CLOCK_FILE
    if not path.is_file():
        raise ConfigError('missing; it must hold {"frozen_at": "...Z", "zone": "UTC"}', file=str(path))
    try:
        return ClockSpec.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, UnicodeDecodeError) as exc:
        detail = one_line(exc) if isinstance(exc, ValidationError) else f"not JSON: {exc}"
        raise ConfigError(detail, file=str(path)) from None
