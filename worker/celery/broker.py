"""The broker behind one edge: Redis, kombu and socket faults met while talking to the broker or
the blob store leave as BrokerError (a HarnessError), so nothing else names a client's exceptions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import kombu.exceptions
import redis.exceptions

from gate.core.errors import BrokerError

_BROKER_ERRORS = (redis.exceptions.RedisError, kombu.exceptions.OperationalError, ConnectionError, OSError)


@contextlib.contextmanager
def broker_call(what: str) -> Iterator[None]:
    """Talk to the broker; a transport fault becomes BrokerError("{what}: reason")."""
    try:
        yield
    except _BROKER_ERRORS as exc:
        raise BrokerError(f"{what}: {exc}") from exc
