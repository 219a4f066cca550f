"""Choosing where the books live: `--ledger FILE` (default `ledger.json` beside the card) or
`--ledger redis://…` / `rediss://…`, the one place that may pick the Redis store (gate.io.redisbooks)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.errors import UsageError
from gate.io.cliargs import REDIS_SCHEMES

if TYPE_CHECKING:  # the run machinery loads only for a command that runs (argument parsing stays cheap)
    from gate.core.suite.suite import Suite
    from gate.run.request import BooksFactory, RunRequest


def add_ledger_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--ledger",
        metavar="FILE|URL",
        help="credit ledger + sampler window: a file (default ledger.json by the card) or redis[s]://HOST:PORT/DB[#KEY]",
    )


def add_new_ledger_argument(run: argparse.ArgumentParser) -> None:
    # `gate run`, and `gate baseline --twice` (its history); a single baseline's books are scratch, in memory.
    run.add_argument("--new-ledger", action="store_true", help="start new books; refused where a ledger exists")


def ledger_url(args: argparse.Namespace) -> str | None:
    """The --ledger Redis URL, or None when the books are a file."""
    text: str | None = args.ledger
    return text if text is not None and text.startswith(REDIS_SCHEMES) else None


def ledger_file(args: argparse.Namespace) -> Path | None:
    """The --ledger file, None for the default file or a Redis URL; a URL of another scheme is refused."""
    text: str | None = args.ledger
    if text is None or ledger_url(args) is not None:
        return None
    if "://" in text:
        raise UsageError("must be a file or a redis:// or rediss:// URL", field="--ledger")
    return Path(text)


def books_factory(args: argparse.Namespace) -> BooksFactory:
    """The store for `gate run`: Redis for a redis:// URL (checked now), else the ledger file."""
    url = ledger_url(args)
    if url is None:
        from gate.run.request import file_books

        return file_books
    # Late import: redis loads only for a run that keeps its books there.
    from gate.io.redisbooks import RedisBooks, split_books_url

    split_books_url(url)  # a URL redis cannot parse is a usage error now, not after the trials

    def redis_books(request: RunRequest, suite: Suite) -> RedisBooks:
        config = suite.config
        return RedisBooks(url, config.ledger, config.sampler, suite_name=config.name, create=request.new_ledger)

    return redis_books
