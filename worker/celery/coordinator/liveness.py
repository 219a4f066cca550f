"""What the coordinator makes of the workers' heartbeats (worker.celery.shared.beats): which enrolled workers
it presumes gone during a run, and, for `gate workers status`, each one's heartbeat as the broker holds it.

Presumed gone: a worker whose heartbeat the coordinator has not seen for `gone_after_s`. A worker is watched
from the first batch sent to it, with the benefit of the doubt until then (it answered discovery); it is up
again as soon as its heartbeat is seen again. The broker restarting empty loses every heartbeat, so
`restarted` gives every worker a fresh allowance. A worker whose heartbeat names a new boot id restarted and
lost whatever it held (it takes batches without acknowledgements): `rebooted` says which, once each.

The heartbeat is the worker's own key, which only its broker user may write: a worker can neither keep another
alive nor make it look gone (a broker user that may write anywhere can do both, which only moves batches
between enrolled workers and never a decision: the first answer counted for a trial is one signed by the key
it was assigned to). A gap in the coordinator's own looks (a broker outage, a pause between waves) is no
evidence either: after one, every worker gets a fresh allowance.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta

import redis

from gate.core.errors import BrokerError
from gate.core.trust.fleet import Beat
from worker.celery.shared.app import direct_queue
from worker.celery.shared.beats import GONE_AFTER_S, SEEN_TTL_S, alive_key, boot_of, read_beat, seen_key
from worker.celery.shared.broker import broker_call

GAP_S = 5.0  # looks further apart than this (an outage, a pause between waves) are no evidence against anyone


def redis_reader(url: str) -> Callable[[Collection[str]], Mapping[str, str]]:
    """Asks the broker at `url`, in one round trip, which of the given key ids have a live heartbeat: key id ->
    the boot id it names."""
    client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)

    def read(keys: Collection[str]) -> dict[str, str]:
        ordered = list(keys)
        with broker_call("reading heartbeats"):
            values = client.mget([alive_key(direct_queue(key)) for key in ordered]) if ordered else []
        return {key: boot_of(value) for key, value in zip(ordered, values, strict=True) if value is not None}

    return read


class Liveness:
    """The last time each watched worker (by key id) was seen beating; `gone_after_s` None: never presume.
    Thread-safe: cross-checks gather on threads of their own, each looking."""

    def __init__(
        self,
        read: Callable[[Collection[str]], Collection[str]],
        gone_after_s: float | None = GONE_AFTER_S,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read, self.gone_after_s, self.clock = read, gone_after_s, clock
        self._seen: dict[str, float] = {}
        self._looked: float | None = None  # when heartbeats were last read
        self._lock = threading.Lock()
        self.gone: frozenset[str] = frozenset()  # presumed gone at the last look, and not seen since
        self._boots: dict[str, str] = {}  # key id -> the boot id its heartbeat last named
        self._rebooted: set[str] = set()  # keys seen under a new boot id, not yet said

    def watch(self, keys: Iterable[str]) -> None:
        """Start the allowance of workers not watched yet (batches were just sent to them)."""
        with self._lock:
            now = self.clock()
            for key in keys:
                self._seen.setdefault(key, now)

    def restarted(self) -> None:
        """The broker lost every heartbeat (or no one looked): each watched worker gets a fresh allowance."""
        with self._lock:
            self._fresh(self.clock())

    def _fresh(self, now: float) -> None:
        self._seen = dict.fromkeys(self._seen, now)

    def look(self) -> frozenset[str]:
        """Read the watched workers' heartbeats; those presumed gone now. An unreachable broker says nothing
        about the workers (the gathering waits it out): the last look stands."""
        with self._lock:
            watched = list(self._seen)
        if self.gone_after_s is None or not watched:
            return frozenset()
        try:
            beating = self.read(watched)
        except BrokerError:
            return self.gone
        with self._lock:
            now = self.clock()
            if self._looked is not None and now - self._looked > GAP_S:
                self._fresh(now)  # not looked for a while (an outage, a pause between waves): that is no evidence
            self._looked = now
            boots = beating if isinstance(beating, Mapping) else dict.fromkeys(beating, "")
            for key, boot in boots.items():
                self._seen[key] = now
                if boot and self._boots.setdefault(key, boot) != boot:
                    self._boots[key] = boot
                    self._rebooted.add(key)
            self.gone = frozenset(key for key, seen in self._seen.items() if now - seen > self.gone_after_s)
            return self.gone

    def rebooted(self) -> frozenset[str]:
        """The workers whose heartbeat named a new boot id since this was last asked: they restarted."""
        with self._lock:
            keys, self._rebooted = frozenset(self._rebooted), set()
            return keys

    def unseen_s(self, key: str) -> float:
        """Seconds since `key` was last seen beating (or first watched)."""
        return self.clock() - self._seen.get(key, self.clock())


def read_beats(url: str, key_ids: Collection[str]) -> dict[str, Beat]:
    """Each key id's heartbeat as the broker at `url` holds it now, in one round trip: live or not, when it last
    beat by the broker's own clock (from what is left of its `.seen` key's life), and its own word on its load."""
    ordered = list(key_ids)
    client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
    try:
        with broker_call("reading the workers' heartbeats"), client.pipeline(transaction=False) as asking:
            asking.time()
            for key in ordered:
                queue = direct_queue(key)
                asking.get(alive_key(queue)).pttl(seen_key(queue))
            answers = asking.execute()
    finally:
        client.close()
    seconds, micros = answers[0]
    now = datetime.fromtimestamp(seconds + micros / 1e6, UTC)
    beats: dict[str, Beat] = {}
    for n, key in enumerate(ordered):
        alive, left_ms = answers[1 + 2 * n], answers[2 + 2 * n]
        fields = read_beat(alive) or {}
        seen = now - timedelta(milliseconds=SEEN_TTL_S * 1000 - left_ms) if left_ms and left_ms > 0 else None
        beats[key] = Beat(
            up=alive is not None,
            last_seen=seen,
            in_flight=_count(fields.get("in_flight")),
            trials_last_minute=_count(fields.get("trials_last_minute")),
        )
    return beats


def _count(value: object) -> int | None:
    """A worker's own count, shown only when it is a plausible one."""
    return value if isinstance(value, int) and 0 <= value < 10**9 else None
