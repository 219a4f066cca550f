"""The gate's books that outlive a run: the harness-credit ledger and the sampler window,
kept in one JSON file (default `ledger.json` beside the card) and rewritten atomically.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from gate.core.bands import SamplerWindow
from gate.core.errors import ConfigError, InputMissingError
from gate.core.ledger import Credit, Ledger
from gate.core.suite import LedgerConfig, SamplerConfig, one_line
from gate.io.artifacts import parse_json, read_input, write_output


class Books(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    credits: dict[str, Credit] = {}
    sampler_window: tuple[bool, ...] = ()


def load_books(path: Path, ledger: LedgerConfig, sampler: SamplerConfig) -> tuple[Ledger, SamplerWindow]:
    """The ledger and window as last saved, under the suite's current budget and window size."""
    books = Books()
    try:
        data = read_input(path, "ledger file")
    except InputMissingError:
        if _exists(path):
            raise  # there but unreadable
        data = None  # no books yet: a fresh ledger and an empty window
    if data is not None:
        try:
            books = Books.model_validate(parse_json(data, path, "ledger file"))
        except ValidationError as exc:
            raise ConfigError(f"not a ledger file: {one_line(exc)}", file=str(path)) from None
    return (
        Ledger(budget=ledger.budget, ttl=timedelta(hours=ledger.ttl_hours), credits=books.credits),
        sampler.empty_window().push(books.sampler_window),
    )


def save_books(path: Path, ledger: Ledger, window: SamplerWindow) -> None:
    books = Books(credits=ledger.credits, sampler_window=window.recent)
    write_output(path, (books.model_dump_json(indent=2) + "\n").encode("utf-8"), "ledger file")


def _exists(path: Path) -> bool:
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError):
        return True  # cannot tell (e.g. a name too long): let the read error stand
    return True
