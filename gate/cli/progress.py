"""Progress on a terminal: a rich bar per property (trials run / planned) and one overall bar with
an ETA, on stderr. Off a terminal nothing is drawn; the structured log is untouched either way."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeRemainingColumn
from rich.progress import Progress as RichBars

from gate.core.escaping import one_line
from gate.core.suite.trial import Side
from gate.core.verdicts.verdict import OutcomeKind
from gate.run.progress import NO_PROGRESS, Progress

OVERALL = "all trials"


class TerminalProgress:
    """A `gate.run.progress.Progress` drawn with rich; it starts on the first planned trial and stops
    (leaving the final bars) when the run says it has finished."""

    def __init__(self, console: Console) -> None:
        self._bars = RichBars(
            TextColumn("{task.description}", markup=False),  # an id is text, never markup
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self._planned: dict[str, int] = {}
        self._overall = self._bars.add_task(OVERALL, total=0)
        self._started = False

    def planned(self, property_id: str, trials: int) -> None:
        if not self._started:
            self._bars.start()
            self._started = True
        task = self._tasks.get(property_id)
        if task is None:
            task = self._bars.add_task(f"  {one_line(property_id)}", total=trials)
            self._tasks[property_id] = task
        self._bars.update(task, total=trials)
        self._planned[property_id] = trials
        self._bars.update(self._overall, total=sum(self._planned.values()))

    def done(self, property_id: str, outcome: OutcomeKind, trial_index: int, side: Side = Side.PATCH) -> None:
        task = self._tasks.get(property_id)
        if task is not None:
            self._bars.advance(task)
        self._bars.advance(self._overall)

    def finished(self) -> None:
        if self._started:
            self._bars.stop()
            self._started = False


def progress_for(stream: TextIO) -> Progress:
    """Bars on `stream` when it is a terminal; otherwise a progress that reports nothing."""
    if not stream.isatty():
        return NO_PROGRESS
    return TerminalProgress(Console(file=stream, stderr=True))
