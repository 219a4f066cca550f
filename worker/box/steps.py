"""Where a container's and a trial's time went, step by step (a report's `steps_s`), for the benchmarks:
kept only when the batch asks (`timings`), so a run that does not ask reads no clock for it."""

from __future__ import annotations

import time


class Steps:
    """Seconds by step name, kept only while `on`; while off, `start` and `stop` read no clock."""

    def __init__(self, on: bool = False) -> None:
        self.on = on
        self.seconds: dict[str, float] = {}

    def start(self) -> float:
        """The clock now, for `stop` (0.0 while off: nothing will be kept from it)."""
        return time.monotonic() if self.on else 0.0

    def stop(self, name: str, started: float) -> None:
        """Keep the seconds since `started` (a `start`) as step `name`."""
        if self.on:
            self.seconds[name] = round(time.monotonic() - started, 6)

    def put(self, name: str, seconds: float) -> None:
        """Keep `seconds`, measured for another reason anyway, as step `name`."""
        if self.on:
            self.seconds[name] = round(seconds, 6)
