"""The broker behind one edge: Redis, kombu and socket faults met while talking to the broker or
the blob store leave as BrokerError (a HarnessError), so nothing else names a client's exceptions.
"""

from __future__ import annotations

import contextlib

import kombu.exceptions
import redis.exceptions

from gate.core.errors import BrokerError, reraise_as

_BROKER_ERRORS = (redis.exceptions.RedisError, kombu.exceptions.OperationalError, ConnectionError, OSError)


def broker_call(what: str) -> contextlib.AbstractContextManager[None]:
    """Talk to the broker; a transport fault becomes BrokerError("{what}: reason")."""
    return reraise_as(BrokerError, what, _BROKER_ERRORS)
