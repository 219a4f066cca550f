"""The books in the Redis a team already runs, for CI runners that start empty every job.

`--ledger redis://[:PASSWORD@]HOST:PORT/DB[#KEY]` (or rediss://): one JSON string, the same
encoding as the ledger file, under KEY (default `probegate:books:<suite name>`; a fragment names
another, percent-encoded). It has no TTL: credits carry their own expiry. Each update is one
WATCH/MULTI/EXEC transaction: read, decide, write, retried (bounded) only when another run wrote
in between, so concurrent runs lose nothing. A fault talking to Redis is a BrokerError (exit 2).
The file books are beside it (ledgerfile.py); only the command line picks this store (gate/cli/books.py),
the one module of gate/io that talks to a service (the `redis-books-picked-by-cli` contract).
"""

from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import redis

from gate.core.errors import BrokerError, ConfigError, HarnessError, UsageError, reraise_as
from gate.core.policy.history import History
from gate.core.policy.ledger import Ledger
from gate.core.suite.suite import LedgerConfig, SamplerConfig
from gate.core.verdicts.bands import SamplerWindow
from gate.io.bookstore import (
    BooksUpdate,
    HistoryUpdate,
    T,
    books_exist,
    decode_all,
    decode_books,
    empty_books,
    encode_books,
    missing_books,
)

SCHEMES = ("redis://", "rediss://")
# What a Redis client raises talking to the server; each leaves as BrokerError (worker.celery.shared.broker
# does the same for the workers' broker, which also speaks through kombu; the books never do).
_REDIS_ERRORS = (redis.exceptions.RedisError, ConnectionError, OSError)
ATTEMPTS = 100  # transactions lost to a concurrent writer before giving up; each costs about a millisecond


def _redis_call(what: str) -> contextlib.AbstractContextManager[None]:
    """Talk to Redis; a client fault becomes BrokerError("{what}: reason")."""
    return reraise_as(BrokerError, what, _REDIS_ERRORS)


def is_books_url(text: str) -> bool:
    return text.startswith(SCHEMES)


def split_books_url(url: str, suite_name: str = "<suite name>") -> tuple[str, str, str]:
    """(connection URL, key, where) for a --ledger URL; `where` names it in errors without the password.
    A URL redis-py cannot parse is a UsageError naming --ledger."""
    base, _, fragment = url.partition("#")
    try:
        redis.connection.parse_url(base)
        parts = urlsplit(base)
        host, port = parts.hostname or "localhost", parts.port or 6379
    except ValueError as exc:
        raise UsageError(f"not a usable redis:// or rediss:// URL: {exc}", field="--ledger") from None
    key = unquote(fragment) or f"probegate:books:{suite_name}"
    db = parts.path.strip("/") or "0"
    return base, key, f"{parts.scheme}://{host}:{port}/{db}#{key}"


class RedisBooks:
    """A `BooksStore` in one Redis string. `create`: the run was given --new-ledger."""

    def __init__(
        self, url: str, ledger: LedgerConfig, sampler: SamplerConfig, *, suite_name: str, create: bool = False
    ) -> None:
        base, self.key, self.where = split_books_url(url, suite_name)
        self.files: tuple[Path, ...] = ()  # nothing on this machine
        # Bounded waits: an unreachable host must refuse the run, not hang it.
        self.client = redis.Redis.from_url(base, socket_connect_timeout=5, socket_timeout=15)
        self.terms = (ledger, sampler)
        self.create = create

    def check(self) -> None:
        with _redis_call(f"cannot reach the ledger at {self.where}"):
            raw = self._get(self.client)
        if raw is not None and self.create:
            raise books_exist(self.where)
        if raw is None and not self.create:
            raise missing_books(self.where)
        if raw is not None:
            decode_books(raw, self.where, *self.terms)  # corrupt or over budget: refused before any container

    def read_all(self) -> tuple[tuple[Ledger, SamplerWindow], History]:
        """The books and the flake history as they stand, read without a write (`gate view`)."""
        with _redis_call(f"cannot reach the ledger at {self.where}"):
            raw = self._get(self.client)
        if raw is None:
            raise missing_books(self.where)
        return decode_all(raw, self.where, *self.terms)

    def update(self, fn: BooksUpdate[T], *, history: HistoryUpdate | None = None) -> T:
        for attempt in range(ATTEMPTS):
            with _redis_call(f"cannot update the ledger at {self.where}"), self.client.pipeline() as pipe:
                try:
                    pipe.watch(self.key)  # EXEC fails if anyone writes the key from here on
                    books, past = self._read(pipe)
                    result, ledger, window = fn(*books)
                    past = history(past) if history is not None else past
                    pipe.multi()
                    pipe.set(self.key, encode_books(ledger, window, past))
                    pipe.execute()
                    return result
                except redis.WatchError:
                    pass
            # Jittered backoff, so runs that collided do not collide again in lockstep.
            time.sleep(random.uniform(0, min(0.25, 0.002 * 2**attempt)))
        raise HarnessError(f"the ledger changed under each of {ATTEMPTS} attempts; nothing written", file=self.where)

    def _read(self, pipe: redis.client.Pipeline) -> tuple[tuple[Ledger, SamplerWindow], History]:
        raw = self._get(pipe)
        if raw is not None:
            return decode_all(raw, self.where, *self.terms)
        # With --new-ledger a concurrent run may have created the key since check(): then it is read above.
        if self.create:
            return empty_books(*self.terms), History()
        raise missing_books(self.where)

    def _get(self, client: redis.Redis | redis.client.Pipeline) -> bytes | None:
        try:
            return client.get(self.key)
        except redis.ResponseError as exc:
            if "WRONGTYPE" in str(exc):
                raise ConfigError("not a ledger: the key holds another Redis type", file=self.where) from None
            raise
