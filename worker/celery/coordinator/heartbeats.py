"""What the broker holds of each worker's heartbeat (worker.celery.shared.liveness), for `gate workers status`:
live or not, when it last beat by the broker's own clock (from what is left of its `.seen` key's life), and its
own word on its load."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta

import redis

from gate.core.trust.fleet import Beat
from worker.celery.shared.app import direct_queue
from worker.celery.shared.broker import broker_call
from worker.celery.shared.liveness import SEEN_TTL_S, alive_key, read_beat, seen_key


def read_beats(url: str, key_ids: Collection[str]) -> dict[str, Beat]:
    """Each key id's heartbeat as the broker at `url` holds it now, in one round trip."""
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
