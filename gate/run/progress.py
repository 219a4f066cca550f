"""How far a run has got, reported as it goes: a small callback seam the wave loop drives.

The run only counts; what is drawn (a terminal bar, nothing at all) is the command line's choice.
"""

from __future__ import annotations

from typing import Protocol

from gate.core.suite.trial import Side
from gate.core.verdicts.verdict import OutcomeKind


class Progress(Protocol):
    """Told of every trial planned and judged; `planned` gives a property's total so far, which a
    sequential rule raises wave by wave; `done` names the trial's index and its side (a paired
    property's trials run on the base tree too)."""

    def planned(self, property_id: str, trials: int) -> None: ...

    def done(self, property_id: str, outcome: OutcomeKind, trial_index: int, side: Side = Side.PATCH) -> None: ...

    def finished(self) -> None: ...


class NoProgress:
    """The default: reports nothing."""

    def planned(self, property_id: str, trials: int) -> None:
        return None

    def done(self, property_id: str, outcome: OutcomeKind, trial_index: int, side: Side = Side.PATCH) -> None:
        return None

    def finished(self) -> None:
        return None


class Both:
    """Two progresses told the same: the command line's bars and the file `gate view` reads."""

    def __init__(self, first: Progress, second: Progress) -> None:
        self.first, self.second = first, second

    def planned(self, property_id: str, trials: int) -> None:
        self.first.planned(property_id, trials)
        self.second.planned(property_id, trials)

    def done(self, property_id: str, outcome: OutcomeKind, trial_index: int, side: Side = Side.PATCH) -> None:
        self.first.done(property_id, outcome, trial_index, side)
        self.second.done(property_id, outcome, trial_index, side)

    def finished(self) -> None:
        self.first.finished()
        self.second.finished()


NO_PROGRESS: Progress = NoProgress()
