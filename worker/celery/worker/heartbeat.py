"""The worker's heartbeat: a thread of the worker's main process that writes its `<direct queue>.alive` key
every BEAT_S, expiring after KEY_TTL_S (worker.celery.shared.liveness). It starts when Celery says the worker
is ready and deletes the key on a clean shutdown (the goodbye); a worker that vanishes leaves the key to lapse.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

import redis

from worker.celery.shared.liveness import BEAT_S, KEY_TTL_S, alive_key, beat_value

log = logging.getLogger("probegate.worker.heartbeat")


def in_flight() -> int:
    """Batches this worker holds now (Celery's record of active requests in the main process)."""
    from celery.worker import state

    return len(state.active_requests)


class Heartbeat:
    """Says, through `url` every `every_s`, that the worker consuming direct queue `queue` is up."""

    def __init__(
        self,
        url: str,
        queue: str,
        name: str,
        *,
        every_s: float = BEAT_S,
        ttl_s: float = KEY_TTL_S,
        busy: Callable[[], int] = in_flight,
    ) -> None:
        self.key, self.name, self.every_s, self.busy = alive_key(queue), name, every_s, busy
        self.ttl_ms = int(ttl_s * 1000)
        # A write that hangs (a connection dropped without a FIN) gives up within one beat.
        self._client = redis.Redis.from_url(url, socket_timeout=every_s, socket_connect_timeout=every_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.beats = 0

    def start(self) -> None:
        """Beat now, then every `every_s` on a daemon thread (a second call does nothing)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="probegate-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and delete the key: the coordinator then knows at once that this worker left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.every_s * 2)
        with contextlib.suppress(redis.RedisError):
            self._client.delete(self.key)
        self._client.close()

    def beat(self) -> bool:
        """Write the key once; False when the broker could not be reached (the next beat tries again)."""
        try:
            self._client.set(self.key, beat_value(self.name, self.beats, self.busy()), px=self.ttl_ms)
        except redis.RedisError as exc:
            log.warning("heartbeat not written: %s", exc)
            return False
        self.beats += 1
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            self.beat()
            self._stop.wait(self.every_s)
