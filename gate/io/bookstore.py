"""The gate's books that outlive a run: the harness-credit ledger and the sampler window.

They live in a store that consecutive CI jobs share (a locked file, `gate.io.ledgerfile`; Redis,
`gate.io.redisbooks`) behind `BooksStore`: `check()` before any container, then one atomic
`update(fn)` at decision time, so two runs on one store never lose each other's entries. This
module holds the protocol, the encoding every store shares, and the refusals they all give.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate.core.errors import ConfigError, InputMissingError, UsageError
from gate.core.policy.history import HISTORY_LIMIT, History, HistoryEntry, bounded
from gate.core.policy.ledger import Credit, Ledger
from gate.core.suite.property import validation_line
from gate.core.suite.suite import LedgerConfig, SamplerConfig
from gate.core.verdicts.bands import SamplerWindow
from gate.io.inputs import parse_json, read_input

T = TypeVar("T")
# What a run does with the books at decision time: (ledger, window) in, (result, ledger, window) out.
BooksUpdate = Callable[[Ledger, SamplerWindow], tuple[T, Ledger, SamplerWindow]]
# What a run adds to the flake history, in the same transaction as the ledger (pure, like BooksUpdate).
HistoryUpdate = Callable[[History], History]
# 1: credits and window only (no `version` key); 2: with the flake history. Old books load as version 1.
BOOKS_VERSION = 2


class Books(BaseModel):
    """The stored form: a JSON object, the same in a file and in a Redis string."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    version: int = Field(1, ge=1)
    credits: dict[str, Credit] = {}
    sampler_window: tuple[bool, ...] = ()
    history: dict[str, tuple[HistoryEntry, ...]] = {}


class BooksStore(Protocol):
    """Where the books live. `where` names the store in errors (never a password); `files`: the files
    it writes on this machine (a file and its lock; none for Redis), which must lie outside the tree."""

    where: str
    files: tuple[Path, ...]

    def check(self) -> None:
        """Refuse, before any container starts, a store that is missing (unless a new one was asked
        for), present when a new one was asked for, unreachable, corrupt or over budget."""
        ...

    def update(self, fn: BooksUpdate[T], *, history: HistoryUpdate | None = None) -> T:
        """Atomically read the books, call `fn` (and `history` on the flake history), write what they
        return; returns fn's result. Both may be called more than once (a retried transaction), so
        they must be pure."""
        ...


def empty_books(ledger: LedgerConfig, sampler: SamplerConfig) -> tuple[Ledger, SamplerWindow]:
    """A fresh ledger and an empty window under the suite's terms."""
    return Ledger(budget=ledger.budget, ttl=timedelta(hours=ledger.ttl_hours)), sampler.empty_window()


def decode_books(data: bytes, where: str, ledger: LedgerConfig, sampler: SamplerConfig) -> tuple[Ledger, SamplerWindow]:
    """The stored books under the suite's current budget and window size; anything malformed, or a
    credit the budget could never have granted (the books were edited), is a ConfigError naming `where`."""
    return decode_all(data, where, ledger, sampler)[0]


def decode_all(
    data: bytes, where: str, ledger: LedgerConfig, sampler: SamplerConfig
) -> tuple[tuple[Ledger, SamplerWindow], History]:
    """`decode_books` and the flake history (empty in books written before it existed); books of a
    newer version than this probegate knows are refused, never rewritten without what it cannot read."""
    try:
        books = Books.model_validate(parse_json(data, where, "ledger"))
    except ValidationError as exc:
        raise ConfigError(f"not a ledger: {validation_line(exc)}", file=where) from None
    if books.version > BOOKS_VERSION:
        raise ConfigError(
            f"books version {books.version} is newer than this probegate reads ({BOOKS_VERSION})",
            file=where,
            field="version",
        )
    for key, entries in books.history.items():
        if [e.at for e in entries] != sorted(e.at for e in entries):
            raise ConfigError(
                "history entries are out of order: the books were edited", file=where, field=f"history.{key}"
            )
    for key, credit in books.credits.items():
        if credit.property_id != key:
            raise ConfigError(f"holds the credit of {credit.property_id!r}", file=where, field=f"credits.{key}")
        if credit.remaining > ledger.budget:
            raise ConfigError(
                f"remaining {credit.remaining} is above the suite's [suite.ledger] budget {ledger.budget}:"
                " the books were edited",
                file=where,
                field=f"credits.{key}",
            )
    # What was read must be writable again after the trials (and go on the card as the policy's
    # inputs): JSON's "\\ud800" parses to a lone surrogate, which no UTF-8 file can hold.
    unwritable = first_unwritable(books.model_dump(mode="python"))
    if unwritable is not None:
        raise ConfigError(
            "holds text that cannot be written back (a lone surrogate): the books were edited",
            file=where,
            field=unwritable,
        )
    fresh, window = empty_books(ledger, sampler)
    history = bounded(History(runs=books.history), HISTORY_LIMIT)
    return (fresh.model_copy(update={"credits": books.credits}), window.push(books.sampler_window)), history


def first_unwritable(value: object, where: str = "") -> str | None:
    """The dotted path of the first string (or key) in `value` that UTF-8 cannot encode, else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where or "(top)"
        return None
    if isinstance(value, dict):
        for key, inner in value.items():
            path = f"{where}.{key}" if where else str(key)
            found = first_unwritable(key, path) or first_unwritable(inner, path)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, inner in enumerate(value):
            found = first_unwritable(inner, f"{where}.{index}" if where else str(index))
            if found is not None:
                return found
    return None


def encode_books(ledger: Ledger, window: SamplerWindow, history: History | None = None) -> bytes:
    runs = history.runs if history is not None else {}
    books = Books(version=BOOKS_VERSION, credits=ledger.credits, sampler_window=window.recent, history=runs)
    return (books.model_dump_json(indent=2) + "\n").encode()


def missing_books(where: str) -> InputMissingError:
    # Never silently fresh: on a throwaway runner a new ledger every job would let no cap bind.
    return InputMissingError(
        "no ledger here; pass --new-ledger to start new books (only where none exist yet)", file=where
    )


def books_exist(where: str) -> UsageError:
    # A fresh store must never replace real books: their credits and window are the gate's memory.
    return UsageError(
        "a ledger already exists here; drop --new-ledger to use its books", file=where, field="--new-ledger"
    )


def load_books(path: Path, ledger: LedgerConfig, sampler: SamplerConfig) -> tuple[Ledger, SamplerWindow]:
    """The books in a ledger file; a missing file is refused (see `missing_books`), never taken as fresh."""
    return load_all(path, ledger, sampler)[0]


def load_all(path: Path, ledger: LedgerConfig, sampler: SamplerConfig) -> tuple[tuple[Ledger, SamplerWindow], History]:
    """`load_books` and the flake history."""
    data = read_input(path, "ledger file", missing=missing_books(str(path)).message)
    return decode_all(data, str(path), ledger, sampler)


def exists(path: Path) -> bool:
    """Whether anything is at `path` (a dangling symlink counts: it is not an absent ledger)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError):
        return True  # cannot tell (e.g. a name too long): let the read error stand
    return True


class MemoryBooks:
    """Books held in memory for one process: `gate baseline`'s scratch books, and tests."""

    def __init__(self, ledger: LedgerConfig, sampler: SamplerConfig) -> None:
        self.where = "memory"
        self.files: tuple[Path, ...] = ()
        self.ledger, self.window = empty_books(ledger, sampler)
        self.history = History()

    def check(self) -> None:
        return None

    def update(self, fn: BooksUpdate[T], *, history: HistoryUpdate | None = None) -> T:
        result, self.ledger, self.window = fn(self.ledger, self.window)
        if history is not None:
            self.history = history(self.history)
        return result
