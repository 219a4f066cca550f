"""Heartbeats: how the coordinator tells a worker that is up from one that vanished without a goodbye.

Each `gate-worker serve` writes one key under its own direct queue's name, `<queue>.alive`, every BEAT_S,
with an expiry of KEY_TTL_S: a worker under its own broker user may write there and nowhere else of another
worker's (worker.celery.coordinator.acl), so no worker can keep another one alive or pass for it. The key
lapses on its own when the worker is SIGKILLed, powered off or cut from the broker without a FIN, which the
broker's visibility timeout (minutes) would otherwise be the first to notice. The coordinator reads the keys
of the workers it sent batches to (worker.celery.coordinator.liveness).
"""

from __future__ import annotations

import json
from typing import Any

BEAT_S = 2.0  # how often a worker says it is up
KEY_TTL_S = 6.0  # three beats: one slow write does not make a worker look gone
# The coordinator's default: unseen this long, a worker's batches go elsewhere. The key itself is gone only
# KEY_TTL_S after the last beat, so a worker is presumed gone about ten seconds after it last beat.
GONE_AFTER_S = 4.0
# A second key, `<queue>.seen`, is written with each beat and lives this long: from what is left of it the
# broker's own clock tells when a worker that is gone last beat (`gate workers status`).
SEEN_TTL_S = 7 * 86400


def alive_key(queue: str) -> str:
    """The heartbeat key of the worker consuming direct queue `queue` (inside its own key space)."""
    return f"{queue}.alive"


def seen_key(queue: str) -> str:
    """The key whose remaining life says when the worker consuming `queue` last beat."""
    return f"{queue}.seen"


def beat_value(name: str, beats: int, in_flight: int, trials_last_minute: int, boot: str = "") -> str:
    """What a heartbeat holds: the worker's name, its beat count, its batches in flight and the trials it took
    in the last minute (display only: the worker says it, so nothing decides on it), and `boot`, drawn anew
    each time the worker starts: a new one tells the coordinator the worker restarted and lost what it held
    (its word again, which can only get its own batches sent to it once more)."""
    fields = {"name": name, "beats": beats, "in_flight": in_flight, "trials_last_minute": trials_last_minute}
    fields["boot"] = boot
    return json.dumps(fields, separators=(",", ":"))


def boot_of(raw: bytes | str | None) -> str:
    """The boot id a heartbeat names ('' when it names none)."""
    boot = (read_beat(raw) or {}).get("boot")
    return boot if isinstance(boot, str) else ""


def read_beat(raw: bytes | str | None) -> dict[str, Any] | None:
    """A heartbeat's fields, or None when there is none or it is not one (a worker's own words: never trusted)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None
