"""The broker behind one edge: Redis, kombu and socket faults met while talking to the broker or
the blob store leave as BrokerError (a HarnessError), so nothing else names a client's exceptions.
"""

from __future__ import annotations

import contextlib
from urllib.parse import quote, urlsplit, urlunsplit

import kombu.exceptions
import redis.exceptions

from gate.core.errors import BrokerError, reraise_as

_BROKER_ERRORS = (redis.exceptions.RedisError, kombu.exceptions.OperationalError, ConnectionError, OSError)


def broker_call(what: str) -> contextlib.AbstractContextManager[None]:
    """Talk to the broker; a transport fault becomes BrokerError("{what}: reason")."""
    return reraise_as(BrokerError, what, _BROKER_ERRORS)


def with_user(url: str, user: str, password: str) -> str:
    """`url` with `user` and `password` in place of its own: the same broker, database and options."""
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1") + (f":{parts.port}" if parts.port else "")
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{address}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
