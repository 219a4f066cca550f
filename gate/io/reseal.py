"""`gate reseal FIXTURE_DIR --seal FILE [--write]`: is the seal file still the seal of the tree?

Recomputes the tree seal and compares it with the seal file. Prints one JSON line on stdout:
`{"changed": false, "seal": DIGEST}` when they agree (the seal file is not touched, its mtime
stays), otherwise `{"changed": true, "seal": NEW, "previous": OLD, "files": {"changed": [...],
"added": [...], "removed": [...]}, "detail": ..., "written": BOOL}` from the manifest diff (a seal
file holding only a digest cannot name files; `detail` says so).

Exit codes (gate.core.errors):
    0   RET_OK       the seal is current, or it was stale (or missing) and --write replaced it
    1   RET_BLOCKED  the seal is stale and --write was not given; nothing was written
    64  RET_USAGE    bad command line, the seal file lies inside the tree it seals, or --write
                     cannot write it (its folder cannot be created or written)
    65  RET_CONFIG   the seal file is malformed (never overwritten: delete it to start over), or
                     the tree holds a symlink, special file or a file name that is not UTF-8
    66  RET_NOINPUT  the fixture directory is missing, or the seal file is missing without --write;
                     or a file or folder cannot be read (permission, name too long)

--write replaces the seal file atomically (temp file, fsync, rename). Automation (the nightly
timer, cron or Celery beat entry) runs without --write: a re-seal is a reviewed commit, and a
job that blessed whatever drifted overnight would make the seal meaningless.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import TextIO

from gate.core.errors import RET_BLOCKED, RET_OK, ConfigError, InputMissingError, UsageError
from gate.core.suite.seal import describe_change
from gate.io.artifacts import check_writable
from gate.io.fixtures import read_seal_file, seal_tree, write_seal_file


def run_reseal(fixture_dir: Path, seal_file: Path, *, write: bool, out: TextIO | None = None) -> int:
    """Compare `seal_file` with the seal of `fixture_dir`, print the report, write only if asked."""
    fixture_dir, seal_file = Path(fixture_dir), Path(seal_file)
    check_seal_outside(seal_file, fixture_dir, "--seal")
    kind = _kind(seal_file)
    if kind not in ("missing", "file"):
        raise ConfigError("not a regular file", file=str(seal_file))
    if write and kind == "missing":
        check_writable(seal_file, "--seal")  # fail before sealing, not after
    old = None if write and kind == "missing" else read_seal_file(seal_file)
    new = seal_tree(fixture_dir)
    report = describe_change(old, new, written=False)
    if report["changed"] and write:
        write_seal_file(seal_file, new)
        report["written"] = True
    print(json.dumps(report), file=out or sys.stdout, flush=True)  # stdout as it is now, not at import
    if report["changed"] and not write:
        return RET_BLOCKED  # the seal is stale
    return RET_OK


def _kind(path: Path) -> str:
    """ "missing", "file", "dir" or "other" for `path`; a path the OS refuses is one GateError."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "the path holds a NUL byte"
        raise InputMissingError(f"cannot read: {reason}", file=str(path)) from None
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"


def check_seal_outside(seal_file: Path, fixture_dir: Path, field: str) -> None:
    """Refuse a seal file inside the tree it seals (`gate seal --write`, `gate reseal --seal`)."""
    if _kind(fixture_dir) == "dir" and _inside(seal_file, fixture_dir):
        # It would seal itself: every write changes the tree, so the seal could never be current.
        raise UsageError("the seal file must lie outside the tree it seals", file=str(seal_file), field=field)


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop (strict=False still raises it)
        return False
