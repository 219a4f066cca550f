"""`gate reseal FIXTURE_DIR --seal FILE [--write]`: is the seal file still the seal of the tree?

Recomputes the tree seal and compares it with the seal file. Prints one JSON line on stdout:
`{"changed": false, "seal": DIGEST}` when they agree (the seal file is not touched, its mtime
stays), otherwise `{"changed": true, "seal": NEW, "previous": OLD, "files": {"changed": [...],
"added": [...], "removed": [...]}, "detail": ..., "written": BOOL}` from the manifest diff (a seal
file holding only a digest cannot name files; `detail` says so).

Exit codes (gate.errors):
    0   RET_OK       the seal is current, or it was stale (or missing) and --write replaced it
    1   RET_BLOCKED  the seal is stale and --write was not given; nothing was written
    64  RET_USAGE    bad command line, or the seal file lies inside the tree it seals
    65  RET_CONFIG   the seal file is malformed (never overwritten: delete it to start over),
                     or the tree holds a symlink or special file
    66  RET_NOINPUT  the fixture directory is missing, or the seal file is missing without --write

--write replaces the seal file atomically (temp file, fsync, rename). Automation (the nightly
timer, cron or Celery beat entry) runs without --write: a re-seal is a reviewed commit, and a
job that blessed whatever drifted overnight would make the seal meaningless.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from gate.errors import RET_BLOCKED, RET_OK, ConfigError, UsageError
from gate.seal import ManifestDiff, Seal, sort_key

NIGHTLY_CRON = "17 3 * * *"  # minute hour day-of-month month day-of-week: 03:17 every day
BEAT_ENTRY = "probegate-nightly-reseal"
TASK_RESEAL = "probegate.reseal"


def describe_change(old: Seal | None, new: Seal, *, written: bool) -> dict[str, Any]:
    """The JSON report for going from the recorded seal `old` (None: no seal file) to the tree's `new`."""
    if old is not None and old.digest == new.digest:
        return {"changed": False, "seal": new.digest}
    if old is None:
        diff = ManifestDiff(added=tuple(sorted(new.manifest, key=sort_key)))
        detail = "no seal file: every file is new"
    else:
        diff = old.diff(new)
        detail = diff.describe()
    return {
        "changed": True,
        "seal": new.digest,
        "previous": old.digest if old is not None else None,
        "files": {"changed": list(diff.changed), "added": list(diff.added), "removed": list(diff.removed)},
        "detail": detail,
        "written": written,
    }


def run_reseal(fixture_dir: Path, seal_file: Path, *, write: bool, out: TextIO = sys.stdout) -> int:
    """Compare `seal_file` with the seal of `fixture_dir`, print the report, write only if asked."""
    from gate.fixtures import read_seal_file, seal_tree, write_seal_file

    fixture_dir, seal_file = Path(fixture_dir), Path(seal_file)
    if fixture_dir.is_dir() and seal_file.resolve().is_relative_to(fixture_dir.resolve()):
        # It would seal itself: every write changes the tree, so the seal could never be current.
        raise UsageError("the seal file must lie outside the tree it seals", file=str(seal_file), field="--seal")
    if seal_file.exists() and not seal_file.is_file():
        raise ConfigError("not a regular file", file=str(seal_file))
    old = None if write and not seal_file.exists() else read_seal_file(seal_file)
    new = seal_tree(fixture_dir)
    report = describe_change(old, new, written=False)
    if report["changed"] and write:
        write_seal_file(seal_file, new)
        report["written"] = True
    print(json.dumps(report), file=out, flush=True)
    if report["changed"] and not write:
        return RET_BLOCKED  # the seal is stale
    return RET_OK


def beat_schedule(fixture_dir: str, seal_file: str, *, queue: str | None = None) -> dict[str, dict[str, Any]]:
    """A Celery `beat_schedule` entry running the `probegate.reseal` task at NIGHTLY_CRON.

    The paths are as the worker that runs the task sees them. Without `queue` the task goes to the
    app's default queue; a worker consuming only its image's queue needs `queue` set to that name.
    """
    from celery.schedules import crontab  # lazy: gate.reseal must import without celery

    minute, hour, day_of_month, month_of_year, day_of_week = NIGHTLY_CRON.split()
    schedule = crontab(
        minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month_of_year, day_of_week=day_of_week
    )
    entry: dict[str, Any] = {"task": TASK_RESEAL, "schedule": schedule, "args": [fixture_dir, seal_file]}
    if queue is not None:
        entry["options"] = {"queue": queue}
    return {BEAT_ENTRY: entry}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="the fixture tree")
    parser.add_argument("--seal", type=Path, required=True, metavar="FILE", help="the seal file to check")
    parser.add_argument("--write", action="store_true", help="replace a stale or missing seal file")


def add_reseal_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `reseal` on the `gate` command's subparsers; returns the new parser."""
    parser = subparsers.add_parser("reseal", help="check the seal file against the tree; --write replaces it")
    _add_arguments(parser)
    return parser


def run_from_args(args: argparse.Namespace) -> int:
    """What `gate reseal` does with its parsed arguments."""
    return run_reseal(args.dir, args.seal, write=args.write)


if __name__ == "__main__":
    from gate.cli import main

    sys.exit(main(["reseal", *sys.argv[1:]]))
