"""The books in one JSON file for one machine (default `ledger.json` beside the card).

Every read-decide-write holds an exclusive lock on `<file>.lock` (filelock: flock on POSIX,
released by the kernel if the holder dies, so no lock outlives its run) and replaces the file in
one rename, so concurrent runs on the file queue for the lock instead of overwriting each other,
and a reader without the lock still sees a whole file.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from gate.core.errors import HarnessError, UsageError
from gate.core.policy.history import History
from gate.core.suite.suite import LedgerConfig, SamplerConfig
from gate.io.artifacts import write_output
from gate.io.bookstore import (
    BooksUpdate,
    HistoryUpdate,
    T,
    books_exist,
    empty_books,
    encode_books,
    exists,
    load_all,
    load_books,
    missing_books,
)
from gate.io.interrupts import raise_if_pending

LOCK_POLL_S = 0.05  # how often a wait for the lock looks for a held Ctrl-C
# Far above one decision (milliseconds); a lock held this long means a stuck run, not a busy one.
LOCK_TIMEOUT_S = 120.0


class FileBooks:
    """A `BooksStore` in a local file. `create`: the run was given --new-ledger."""

    def __init__(
        self,
        path: Path,
        ledger: LedgerConfig,
        sampler: SamplerConfig,
        *,
        create: bool = False,
        lock_timeout_s: float = LOCK_TIMEOUT_S,
    ) -> None:
        self.path = path
        self.where = str(path)
        self.files = (path, path.with_name(path.name + ".lock"))
        self.terms = (ledger, sampler)
        self.create = create
        self.lock_timeout_s = lock_timeout_s

    def check(self) -> None:
        if exists(self.path):
            if self.create:
                raise books_exist(self.where)
            load_books(self.path, *self.terms)  # corrupt or over budget: refused now, before any container
        elif not self.create:
            raise missing_books(self.where)
        # Absent and asked for: written by the first update, so a run that stops early leaves no empty books.

    def update(self, fn: BooksUpdate[T], *, history: HistoryUpdate | None = None) -> T:
        with self._locked():
            # With --new-ledger the file may have appeared since check(): a concurrent run created it,
            # and its entries are kept (read, then added to), never replaced.
            fresh = self.create and not exists(self.path)
            books, past = (empty_books(*self.terms), History()) if fresh else load_all(self.path, *self.terms)
            result, ledger, window = fn(*books)
            past = history(past) if history is not None else past
            write_output(self.path, encode_books(ledger, window, past), "ledger file")
        return result

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock_path = self.files[1]
        try:
            if self.create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(lock_path))
            _acquire(lock, self.lock_timeout_s)
        except Timeout:
            raise HarnessError(
                f"the ledger file stayed locked for {self.lock_timeout_s:.0f} s by another run", file=str(lock_path)
            ) from None
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise UsageError(f"cannot lock the ledger file: {reason}", file=str(lock_path), field="--ledger") from None
        try:
            yield
        finally:
            lock.release()


def _acquire(lock: FileLock, timeout_s: float) -> None:
    """Wait for the lock in short tries: the commit holds Ctrl-C (gate.io.interrupts), and while we
    queue for another run's books nothing is written yet, so a held Ctrl-C stops the run here."""
    deadline = time.monotonic() + timeout_s
    while True:
        raise_if_pending()
        try:
            lock.acquire(timeout=min(LOCK_POLL_S, max(0.0, deadline - time.monotonic())), poll_interval=0.01)
            return
        except Timeout:
            if time.monotonic() >= deadline:
                raise
