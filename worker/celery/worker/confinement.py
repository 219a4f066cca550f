"""Whether this worker is confined: started under its own broker user (made by `gate workers enrol`,
worker.celery.coordinator.acl), it may not read the shared queue and so consumes its direct queue alone."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from gate.core.errors import BrokerError


def confined(url: str, queue: str, note: Callable[[str], None] | None = None) -> bool:
    """Whether the broker user of `url` is refused `queue` (a worker's own ACL user: it may take batches from
    its own direct queue alone). An unreachable broker is asked again until it answers (said once through
    `note`); refused credentials (a revoked worker's, say) raise BrokerError."""
    client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
    said = False
    try:
        while True:
            try:
                client.llen(queue)
                return False
            except redis.exceptions.NoPermissionError:
                return True
            except redis.exceptions.AuthenticationError as exc:
                raise BrokerError(f"the broker refused this worker's credentials: {exc}") from None
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                if note is not None and not said:
                    note(f"the broker is unreachable ({exc}); waiting for it")
                    said = True
                time.sleep(2)  # as Celery itself waits for a broker that is not up yet
    finally:
        client.close()
