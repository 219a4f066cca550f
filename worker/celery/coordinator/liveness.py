"""Which enrolled workers the coordinator presumes gone: those whose heartbeat (worker.celery.shared.liveness)
it has not seen for `gone_after_s`. A worker is watched from the first batch sent to it, with the benefit of
the doubt until then (it answered discovery); it is up again as soon as its heartbeat is seen again. The
broker restarting empty loses every heartbeat, so `restarted` gives every worker a fresh allowance.

The heartbeat is the worker's own key, which only its broker user may write: a worker can neither keep another
alive nor make it look gone (a broker user that may write anywhere can do both, which only moves batches
between enrolled workers and never a decision: the first answer counted for a trial is one signed by the key
it was assigned to). A gap in the coordinator's own looks (a broker outage, a pause between waves) is no
evidence either: after one, every worker gets a fresh allowance.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable

import redis

from gate.core.errors import BrokerError
from worker.celery.shared.app import direct_queue
from worker.celery.shared.broker import broker_call
from worker.celery.shared.liveness import GONE_AFTER_S, alive_key

GAP_S = 5.0  # looks further apart than this (an outage, a pause between waves) are no evidence against anyone


def redis_reader(url: str) -> Callable[[Collection[str]], set[str]]:
    """Asks the broker at `url`, in one round trip, which of the given key ids have a live heartbeat."""
    client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)

    def read(keys: Collection[str]) -> set[str]:
        ordered = list(keys)
        with broker_call("reading heartbeats"):
            values = client.mget([alive_key(direct_queue(key)) for key in ordered]) if ordered else []
        return {key for key, value in zip(ordered, values, strict=True) if value is not None}

    return read


class Liveness:
    """The last time each watched worker (by key id) was seen beating; `gone_after_s` None: never presume."""

    def __init__(
        self,
        read: Callable[[Collection[str]], set[str]],
        gone_after_s: float | None = GONE_AFTER_S,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read, self.gone_after_s, self.clock = read, gone_after_s, clock
        self._seen: dict[str, float] = {}
        self._looked: float | None = None  # when heartbeats were last read
        self.gone: frozenset[str] = frozenset()  # presumed gone at the last look, and not seen since

    def watch(self, keys: Iterable[str]) -> None:
        """Start the allowance of workers not watched yet (batches were just sent to them)."""
        now = self.clock()
        for key in keys:
            self._seen.setdefault(key, now)

    def restarted(self) -> None:
        """The broker lost every heartbeat (or no one looked): each watched worker gets a fresh allowance."""
        now = self.clock()
        self._seen = dict.fromkeys(self._seen, now)

    def look(self) -> frozenset[str]:
        """Read the watched workers' heartbeats; those presumed gone now. An unreachable broker says nothing
        about the workers (the gathering waits it out): the last look stands."""
        if self.gone_after_s is None or not self._seen:
            return frozenset()
        try:
            beating = self.read(self._seen)
        except BrokerError:
            return self.gone
        now = self.clock()
        if self._looked is not None and now - self._looked > GAP_S:
            self.restarted()  # not looked for a while (an outage, a pause between waves): that is no evidence
        self._looked = now
        for key in beating:
            self._seen[key] = now
        self.gone = frozenset(key for key, seen in self._seen.items() if now - seen > self.gone_after_s)
        return self.gone

    def unseen_s(self, key: str) -> float:
        """Seconds since `key` was last seen beating (or first watched)."""
        return self.clock() - self._seen.get(key, self.clock())
