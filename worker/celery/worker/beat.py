"""The nightly re-seal check on a Celery beat: one schedule entry sending `probegate.reseal` to a
worker at NIGHTLY_CRON. The systemd timer and the cron line in deploy/ use the same time (a test
checks); the check never writes the seal (a re-seal is a reviewed commit).
"""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

from worker.celery.shared.app import TASK_RESEAL

NIGHTLY_CRON = "17 3 * * *"  # minute hour day-of-month month day-of-week: 03:17 every day
BEAT_ENTRY = "probegate-nightly-reseal"


def beat_schedule(fixture_dir: str, seal_file: str, *, queue: str | None = None) -> dict[str, dict[str, Any]]:
    """A Celery `beat_schedule` entry running the `probegate.reseal` task at NIGHTLY_CRON.

    The paths are as the worker that runs the task sees them. Without `queue` the task goes to the
    app's default queue; a worker consuming only its image's queue needs `queue` set to that name.
    """
    minute, hour, day_of_month, month_of_year, day_of_week = NIGHTLY_CRON.split()
    schedule = crontab(
        minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month_of_year, day_of_week=day_of_week
    )
    entry: dict[str, Any] = {"task": TASK_RESEAL, "schedule": schedule, "args": [fixture_dir, seal_file]}
    if queue is not None:
        entry["options"] = {"queue": queue}
    return {BEAT_ENTRY: entry}
