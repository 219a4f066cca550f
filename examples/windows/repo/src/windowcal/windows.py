"""The next windows of a schedule after a given instant, in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dateutil import rrule, tz


def next_windows(config: dict[str, Any], now: datetime, count: int = 3) -> list[dict[str, str]]:
    """The next `count` windows starting after `now`, each as UTC ISO start and end."""
    zone = tz.gettz(config["timezone"])
    if zone is None:
        raise ValueError(f"unknown timezone {config['timezone']!r}")
    start = datetime.fromisoformat(str(config["start"])).replace(tzinfo=zone)
    rule = rrule.rrulestr(config["rrule"], dtstart=start)
    length = timedelta(minutes=config.get("duration_minutes", 60))
    found = []
    for begin in rule.xafter(now.astimezone(zone), count=count):
        found.append({"start": _utc(begin), "end": _utc(begin + length)})
    return found


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
