"""The worker's heartbeat: a thread of the worker's main process that writes its `<direct queue>.alive` key
every BEAT_S, expiring after KEY_TTL_S (worker.celery.shared.beats). It starts when Celery says the worker
is ready and deletes the key on a clean shutdown (the goodbye); a worker that vanishes leaves the key to lapse.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import redis

from worker.celery.shared.beats import BEAT_S, KEY_TTL_S, SEEN_TTL_S, alive_key, beat_value, seen_key

log = logging.getLogger("probegate.worker.heartbeat")


def in_flight() -> int:
    """Batches this worker holds now (Celery's record of active requests in the main process)."""
    from celery.worker import state

    return len(state.active_requests)


def beat_while_serving(broker: str, queue: str, name: str) -> Heartbeat:
    """Write the heartbeat of the worker consuming direct queue `queue` from the moment Celery says it is ready
    until it shuts down, counting the trials it takes (Celery's signals, in the worker's main process)."""
    from celery.signals import task_received, worker_ready, worker_shutdown

    meter = TrialMeter()
    heart = Heartbeat(broker, queue, name, meter=meter)
    task_received.connect(meter.received, weak=False)
    worker_ready.connect(lambda **_: heart.start(), weak=False)
    worker_shutdown.connect(lambda **_: heart.stop(), weak=False)
    return heart


class TrialMeter:
    """The trials this worker took (batches received, by their trial count) over the last minute."""

    def __init__(self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s, self.clock = window_s, clock
        self._taken: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def received(self, request: Any = None, **_: Any) -> None:
        """Celery's `task_received` (main process): count the batch's trials, from its wire payload."""
        args = getattr(request, "args", None) or ()
        payload = args[0] if args else None
        indices = payload.get("indices") if isinstance(payload, dict) else None
        self.add(len(indices) if isinstance(indices, list) else 0)

    def add(self, trials: int) -> None:
        with self._lock:
            self._taken.append((self.clock(), trials))

    def last_minute(self) -> int:
        with self._lock:
            cutoff = self.clock() - self.window_s
            while self._taken and self._taken[0][0] < cutoff:
                self._taken.popleft()
            return sum(n for _, n in self._taken)


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
        meter: TrialMeter | None = None,
    ) -> None:
        self.key, self.name, self.every_s, self.busy = alive_key(queue), name, every_s, busy
        self.seen = seen_key(queue)
        self.meter = meter or TrialMeter()
        self.ttl_ms = int(ttl_s * 1000)
        # A write that hangs (a connection dropped without a FIN) gives up within one beat.
        self._client = redis.Redis.from_url(url, socket_timeout=every_s, socket_connect_timeout=every_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.beats = 0
        self.boot = secrets.token_hex(8)  # anew at each start: the coordinator sees a restart by it

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
        value = beat_value(self.name, self.beats, self.busy(), self.meter.last_minute(), self.boot)
        try:
            with self._client.pipeline(transaction=False) as both:
                both.set(self.key, value, px=self.ttl_ms).set(self.seen, value, px=int(SEEN_TTL_S * 1000)).execute()
        except redis.RedisError as exc:
            log.warning("heartbeat not written: %s", exc)
            return False
        self.beats += 1
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            self.beat()
            self._stop.wait(self.every_s)
