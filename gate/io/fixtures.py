"""The filesystem side of sealing: walk a tree (refusing what cannot be sealed), stream its files
into `gate.core.suite.seal`, read and write seal files, verify a fixture tree, and read its clock.json.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from gate.core.errors import ConfigError, FixtureTreeError, InputMissingError, SealDriftError
from gate.core.suite.property import validation_line
from gate.core.suite.seal import Seal, compute
from gate.core.suite.trial import ClockSpec
from gate.io.artifacts import write_output
from gate.io.inputs import decode_text, parse_json, read_input

CHUNK = 1 << 20
CLOCK_FILE = "clock.json"


def matches_any(rel: str, globs: Iterable[str]) -> bool:
    """Whether a tree-relative POSIX path matches one of `globs` (fnmatch: `*` also crosses `/`)."""
    return any(fnmatch.fnmatchcase(rel, glob) for glob in globs)


def tree_files(root: Path, *, skip_dirs: frozenset[str] = frozenset(), exclude: Sequence[str] = ()) -> list[str]:
    """Relative POSIX paths of every regular file under `root` but those matching an `exclude` glob;
    symlinks, specials, unreadable folders and names that are not UTF-8 are refused, naming the
    tree and the file."""
    if not _is_dir(root):
        raise InputMissingError("directory not found", file=str(root))

    def refuse(exc: OSError) -> None:
        # os.walk would skip an unreadable folder silently, and the seal would miss its files.
        rel = _relative(exc.filename, root)
        raise InputMissingError(f"cannot read {rel}: {exc.strerror or exc}", file=str(root))

    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=refuse, followlinks=False):
        dirnames[:] = [d for d in dirnames if d not in skip_dirs]
        for name in [*dirnames, *filenames]:
            full = Path(dirpath, name)
            rel = full.relative_to(root).as_posix()
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:  # os.walk hands undecodable bytes over as lone surrogates
                raise FixtureTreeError(f"file name {rel} is not UTF-8; rename it", file=str(root)) from None
            if matches_any(rel, exclude):
                continue
            try:
                mode = full.lstat().st_mode
            except OSError as exc:
                raise InputMissingError(f"cannot read {rel}: {exc.strerror or exc}", file=str(root)) from None
            if stat.S_ISLNK(mode):
                raise FixtureTreeError(f"symlink {rel} cannot be sealed; replace it with the file", file=str(root))
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise FixtureTreeError(f"{rel} is not a regular file", file=str(root))
            found.append(rel)
    return found


def _reader(root: Path) -> Callable[[str], Iterator[bytes]]:
    def read(rel: str) -> Iterator[bytes]:
        # O_NONBLOCK: a file swapped for a FIFO after the walk must not hang the seal.
        fd = os.open(root / rel, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise FixtureTreeError(f"{rel} is not a regular file", file=str(root))
            while chunk := handle.read(CHUNK):
                yield chunk

    return read


def seal_tree(root: Path, *, skip_dirs: frozenset[str] = frozenset(), exclude: Sequence[str] = ()) -> Seal:
    """Seal the tree at `root`, streaming each file in 1 MiB chunks."""
    files = tree_files(root, skip_dirs=skip_dirs, exclude=exclude)
    try:
        return compute(files, _reader(root))
    except OSError as exc:
        rel = _relative(exc.filename, root)
        raise InputMissingError(f"cannot read {rel}: {exc.strerror or exc}", file=str(root)) from None


def read_seal_file(path: Path) -> Seal:
    """Parse the seal file at `path`; every problem is one GateError naming it."""
    data = read_input(path, "seal file", missing="seal file not found (make one with `gate seal DIR --write FILE`)")
    try:
        return Seal.from_text(decode_text(data, path, "seal file"))
    except ValueError as exc:
        raise ConfigError(f"not a seal file: {exc}", file=str(path)) from None


def write_seal_file(path: Path, seal: Seal) -> None:
    write_output(path, seal.to_text().encode("utf-8"), "seal file")


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
    missing = 'missing; it must hold {"frozen_at": "...Z", "zone": "UTC"}'
    data = read_input(path, CLOCK_FILE, missing=missing, missing_error=ConfigError)
    raw = parse_json(data, path, CLOCK_FILE)
    try:
        return ClockSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(validation_line(exc), file=str(path)) from None


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # e.g. ENAMETOOLONG, which pathlib does not swallow
        return False


def _relative(filename: object, root: Path) -> str:
    """`filename` (from an OSError) relative to `root` when it lies inside, else as given."""
    if not isinstance(filename, (str, bytes)):
        return str(root)
    name = os.fsdecode(filename)
    try:
        return Path(name).relative_to(root).as_posix()
    except ValueError:
        return name
