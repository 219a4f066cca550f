"""The run journal on disk: JSON lines (`gate.core.suite.journal`), one append per observed trial, so a
coordinator killed outright loses at most the line it was writing (each line is one write to the OS; it
reaches the disk within about a second, and at every wave's end).

The file is locked (flock) by the run writing it, so a resume never shares a journal with a live run;
a kill releases the lock. A torn last line (the one being written at the kill) is dropped on reading
and cut off before a resume appends; a torn line anywhere else is a broken journal.

A resume reads the journal back and trusts what it holds, so it lives where no patch can put a file: in
the coordinator's state folder (`$PROBEGATE_STATE_DIR`, else `$XDG_STATE_HOME/probegate`, else
`~/.local/state/probegate`), under `journals/`, named for the card it belongs to (its name and a digest of
its absolute path) — never beside a card, which usually lies in the patched repository. A state folder
inside the patched tree's repository is refused (`check_journal_place`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from gate.core.errors import GateError, JournalError, UsageError
from gate.core.suite.journal import Journal, JournalHeader, canonical, commit_line, header_line, parse_lines
from gate.io.artifacts import write_atomic
from gate.io.inputs import parse_problem, read_input, reason
from gate.io.suite import repository_of

SUFFIX = ".journal"
STATE_ENV = "PROBEGATE_STATE_DIR"
SYNC_EVERY_S = 1.0  # a machine that stops (not only a killed process) loses at most about this much
MAX_INT = 2**53  # no observation holds a larger number; a card could not carry one (gate.core.card.card)


def journal_path(card: Path, state_dir: Path) -> Path:
    """Where the run writing the card at `card` keeps its journal (one per card path, in `state_dir`)."""
    where = card.resolve()
    digest = hashlib.sha256(os.fsencode(where)).hexdigest()[:16]
    return state_dir / "journals" / f"{where.name[:100]}-{digest}{SUFFIX}"


def check_journal_place(path: Path, workdir: Path) -> None:
    """Refuse a journal the patch could have placed: inside the patched tree or the repository it lies in."""
    inside = repository_of(workdir.resolve())  # everything under it may have come with the patch
    if path.resolve().is_relative_to(inside):
        raise UsageError(
            f"the run journal would lie inside the patched tree's repository ({inside}), where a patch could"
            f" place one: set {STATE_ENV} to a folder outside it",
            file=str(path),
            field=STATE_ENV,
        )


def _folder(path: Path) -> None:
    # Private: the journal holds the run's canaries until the run commits.
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make the run journal's folder: {reason(exc)}", file=str(path.parent)) from None


class _Absent(GateError):
    """No journal at the path (read_input's missing case, caught here)."""


def _lock(path: Path) -> int:
    """An append descriptor on the journal, exclusively locked; a live run's lock is refused."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise _Absent("no journal") from None
    except OSError as exc:
        raise UsageError(f"cannot open the run journal: {reason(exc)}", file=str(path)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise JournalError("another gate run is writing this journal now", file=str(path)) from None
    return fd


def _bounded_int(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_INT:
        raise ValueError("a number beyond ±2**53")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number beyond the float range")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a number")


def read_journal(path: Path) -> tuple[Journal, JournalWriter] | None:
    """The journal at `path`, locked for appending (its torn last line cut off); None when there is none.
    Malformed, edited or broken: JournalError naming the file and the line."""
    try:
        fd = _lock(path)
    except _Absent:
        return None
    try:
        data = read_input(path, "run journal")
        journal, keep = _parsed(data, path)
    except BaseException:
        os.close(fd)
        raise
    # The torn line is cut off only when the resume appends: a refused resume leaves the file as it was.
    return journal, JournalWriter(path, fd, journal.chain, cut_at=keep if keep < len(data) else None)


def peek_journal(path: Path) -> Journal | None:
    """The journal at `path` as it stands, read without a lock or a write (a live run may be appending to
    it; its torn last line is left out); None when there is none. Broken: JournalError as `read_journal`."""
    try:
        data = read_input(path, "run journal", missing_error=_Absent)
    except _Absent:
        return None
    return _parsed(data, path)[0]


def _parsed(data: bytes, path: Path) -> tuple[Journal, int]:
    """The journal in `data` and where its torn last line starts (len(data) when there is none)."""
    keep = data.rfind(b"\n") + 1  # a torn last line (killed while writing it) is dropped
    lines: list[dict[str, Any]] = []
    for number, raw in enumerate(data[:keep].splitlines(), start=1):
        try:
            value = json.loads(raw, parse_int=_bounded_int, parse_float=_finite, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise JournalError(f"line {number}: not JSON: {parse_problem(exc)}", file=str(path)) from None
        if not isinstance(value, dict):
            raise JournalError(f"line {number}: not a JSON object", file=str(path))
        lines.append(value)
    try:
        return parse_lines(lines), keep
    except JournalError as exc:
        raise JournalError(exc.message, file=str(path)) from None


def discard_journal(path: Path) -> bool:
    """Remove an interrupted run's journal (a fresh run must never pick up its observations); a journal a
    live run is writing is refused, not taken from it. Returns whether there was one."""
    try:
        fd = _lock(path)
    except _Absent:
        return False
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot remove the run journal: {reason(exc)}", file=str(path)) from None
    finally:
        os.close(fd)
    return True


def new_journal(path: Path, header: JournalHeader) -> JournalWriter:
    """A fresh journal holding only `header`, replacing (in one rename) whatever was at `path`."""
    line = header_line(header)
    _folder(path)
    try:
        write_atomic(path, canonical(line) + b"\n")
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write the run journal: {reason(exc)}", file=str(path)) from None
    try:
        fd = _lock(path)
    except _Absent:
        raise UsageError("the run journal vanished as it was written", file=str(path)) from None
    return JournalWriter(path, fd, line["chain"])


class JournalWriter:
    """Appends chained lines to one locked journal; each line reaches the OS in one write."""

    def __init__(self, path: Path, fd: int, chain: str, *, cut_at: int | None = None) -> None:
        self.path, self.chain = path, chain
        self._fd: int | None = fd
        self._cut_at = cut_at  # where a torn last line starts, cut off before the first append
        self._synced = time.monotonic()

    def append(self, line: dict[str, Any]) -> None:
        """Write one line (its `chain` is the journal's new chain): written, not yet synced."""
        data = memoryview(canonical(line) + b"\n")
        while data:
            data = data[self._write(data) :]
        self.chain = line["chain"]
        if time.monotonic() - self._synced >= SYNC_EVERY_S:
            self.sync()

    def _write(self, data: memoryview) -> int:
        if self._fd is None:
            raise UsageError("the run journal is closed", file=str(self.path))
        try:
            if self._cut_at is not None:
                os.ftruncate(self._fd, self._cut_at)
                self._cut_at = None
            return os.write(self._fd, data)
        except OSError as exc:
            raise UsageError(f"cannot append to the run journal: {reason(exc)}", file=str(self.path)) from None

    def sync(self) -> None:
        """To the disk (a machine that stops, not only a killed process, keeps what came before)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            self._synced = time.monotonic()

    def commit(self) -> None:
        """Mark the run as reaching its commit: from here a resume of this journal is refused."""
        self.append(commit_line(self.chain))
        self.sync()

    def remove(self) -> None:
        """The run is committed: the journal goes (a failure to remove it only leaves a committed journal)."""
        with contextlib.suppress(OSError):
            self.path.unlink()
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
