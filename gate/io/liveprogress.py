"""A run's judged progress beside its journal: per property, the trials planned so far and how many the
checks judged a hit, rewritten whole as waves are judged. `gate view` shows it for a run in progress; the
journal holds observations only, and the view never runs a check itself."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from gate.core.errors import GateError
from gate.core.verdicts.verdict import OutcomeKind
from gate.io.artifacts import write_atomic
from gate.io.inputs import read_input

SUFFIX = ".progress"
EVERY_S = 0.5  # the file is rewritten at most this often while trials are judged


def progress_path(journal: Path) -> Path:
    """Where the run whose journal is at `journal` keeps its judged progress."""
    return journal.with_name(journal.name + SUFFIX)


class ProgressFile:
    """A `gate.run.progress.Progress` that keeps the counts in a small JSON file (atomically replaced):
    {"properties": {id: {"planned", "judged", "hits"}}, "finished"}, rewritten for every plan and at the end,
    and for judged trials at most every `every_s`. Counts only: no output, no canary."""

    def __init__(self, path: Path, *, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.every_s, self.clock = path, every_s, clock
        self._counts: dict[str, dict[str, int]] = {}
        self._written = float("-inf")

    def planned(self, property_id: str, trials: int) -> None:
        self._of(property_id)["planned"] = trials
        self._write(now=True)  # once per property and wave: every row is listed from the start

    def done(self, property_id: str, outcome: OutcomeKind) -> None:
        counts = self._of(property_id)
        counts["judged"] += 1
        counts["hits"] += outcome is OutcomeKind.HIT
        self._write()

    def finished(self) -> None:
        self._write(now=True, finished=True)

    def _of(self, property_id: str) -> dict[str, int]:
        return self._counts.setdefault(property_id, {"planned": 0, "judged": 0, "hits": 0})

    def _write(self, *, now: bool = False, finished: bool = False) -> None:
        at = self.clock()
        if not now and at - self._written < self.every_s:
            return
        self._written = at
        document = {"properties": self._counts, "finished": finished}
        # The view's copy of what the run knows: losing an update never touches the run.
        with contextlib.suppress(OSError):
            write_atomic(self.path, json.dumps(document, sort_keys=True).encode())


def read_progress(path: Path) -> dict[str, dict[str, int]]:
    """The judged counts by property at `path`; empty when there is no file yet or it does not parse."""
    try:
        document = json.loads(read_input(path, "run progress"))
        properties = document["properties"]
        return {
            str(pid): {key: int(counts[key]) for key in ("planned", "judged", "hits")}
            for pid, counts in properties.items()
        }
    except (GateError, ValueError, KeyError, TypeError, AttributeError):
        return {}
