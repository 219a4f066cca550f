"""A run's judged progress beside its journal: per property, the trials planned so far and how many the
checks judged a hit; for a property the suite judges by an SPRT, that rule and each trial's outcome by
index, and for one it judges by the paired rule, that rule and each trial's outcome on both trees by
index; rewritten whole as waves are judged. `gate view` shows it for a run in progress (the hit rate, the
sequential test's path); the journal holds observations only, and the view never runs a check itself."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.core.errors import GateError
from gate.core.suite.trial import Side
from gate.core.verdicts.bands import SprtRule
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import OutcomeKind
from gate.io.artifacts import write_atomic
from gate.io.inputs import read_input

SUFFIX = ".progress"
EVERY_S = 0.5  # the file is rewritten at most this often while trials are judged

# One letter per trial index in a property's `outcomes`; NOT_YET marks an index planned but not judged.
LETTERS = {OutcomeKind.HIT: "h", OutcomeKind.MISS: "m", OutcomeKind.TIMEOUT: "t", OutcomeKind.FAULT: "f"}
KINDS = {letter: kind for kind, letter in LETTERS.items()}
NOT_YET = "."


@dataclass(frozen=True)
class Judged:
    """One property's judged progress as the file holds it (both trees' trials for a paired one); `sprt` and
    `outcomes` only under an SPRT, `paired`, `outcomes` and `base_outcomes` only under the paired rule."""

    planned: int = 0
    judged: int = 0
    hits: int = 0
    sprt: SprtRule | None = None
    outcomes: str = ""  # by trial index: a LETTERS letter, or NOT_YET
    paired: PairedRule | None = None
    base_outcomes: str = ""  # the base tree's, as `outcomes`

    def judged_kinds(self) -> list[OutcomeKind]:
        """The judged trials' outcomes in trial-index order (those not judged yet left out)."""
        return [KINDS[letter] for letter in self.outcomes if letter != NOT_YET]

    def by_index(self, side: Side) -> list[tuple[int, OutcomeKind]]:
        """One tree's judged trials as (trial index, outcome), in trial-index order."""
        letters = self.base_outcomes if side is Side.BASE else self.outcomes
        return [(index, KINDS[letter]) for index, letter in enumerate(letters) if letter != NOT_YET]


def progress_path(journal: Path) -> Path:
    """Where the run whose journal is at `journal` keeps its judged progress."""
    return journal.with_name(journal.name + SUFFIX)


class ProgressFile:
    """A `gate.run.progress.Progress` that keeps the counts in a small JSON file (atomically replaced):
    {"properties": {id: {"planned", "judged", "hits"[, "sprt", "outcomes"]}}, "finished"}, rewritten for
    every plan and at the end, and for judged trials at most every `every_s`. `sprt` and `paired`: the rules
    of the properties the suite judges by an SPRT or the paired rule, from the run's own suite. Counts and
    outcomes only: no output, no canary."""

    def __init__(
        self,
        path: Path,
        *,
        sprt: Mapping[str, SprtRule] | None = None,
        paired: Mapping[str, PairedRule] | None = None,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self.every_s, self.clock = path, every_s, clock
        self.sprt, self.paired = dict(sprt or {}), dict(paired or {})
        self._counts: dict[str, dict[str, int]] = {}
        self._letters: dict[tuple[str, Side], list[str]] = {}
        self._written = float("-inf")

    def planned(self, property_id: str, trials: int) -> None:
        self._of(property_id)["planned"] = trials
        self._write(now=True)  # once per property and wave: every row is listed from the start

    def done(self, property_id: str, outcome: OutcomeKind, trial_index: int, side: Side = Side.PATCH) -> None:
        counts = self._of(property_id)
        counts["judged"] += 1
        counts["hits"] += outcome is OutcomeKind.HIT
        cap = self._cap(property_id, side)
        if 0 <= trial_index < cap:
            letters = self._letters.setdefault((property_id, side), [])
            letters.extend(NOT_YET * (trial_index + 1 - len(letters)))
            letters[trial_index] = LETTERS[outcome]
        self._write()

    def _cap(self, property_id: str, side: Side) -> int:
        """How many trial indices of this side are kept by letter: a rule's cap, else none."""
        if (sprt := self.sprt.get(property_id)) is not None:
            return sprt.max_trials if side is Side.PATCH else 0
        paired = self.paired.get(property_id)
        return paired.max_pairs if paired is not None else 0

    def finished(self) -> None:
        self._write(now=True, finished=True)

    def _of(self, property_id: str) -> dict[str, int]:
        return self._counts.setdefault(property_id, {"planned": 0, "judged": 0, "hits": 0})

    def _write(self, *, now: bool = False, finished: bool = False) -> None:
        at = self.clock()
        if not now and at - self._written < self.every_s:
            return
        self._written = at
        properties: dict[str, dict[str, Any]] = {pid: dict(counts) for pid, counts in self._counts.items()}
        for pid, counts in properties.items():
            patch = "".join(self._letters.get((pid, Side.PATCH), ()))
            if (sprt := self.sprt.get(pid)) is not None:
                counts |= {"sprt": sprt.model_dump(mode="json"), "outcomes": patch}
            elif (paired := self.paired.get(pid)) is not None:
                base = "".join(self._letters.get((pid, Side.BASE), ()))
                counts |= {"paired": paired.model_dump(mode="json"), "outcomes": patch, "base_outcomes": base}
        document = {"properties": properties, "finished": finished}
        # The view's copy of what the run knows: losing an update never touches the run.
        with contextlib.suppress(OSError):
            write_atomic(self.path, json.dumps(document, sort_keys=True).encode())


def read_progress(path: Path) -> dict[str, Judged]:
    """The judged progress by property at `path`; empty when there is no file yet, or any part of it does not
    parse or does not add up (a sequential property's outcomes against its counts and its rule's cap)."""
    try:
        document = json.loads(read_input(path, "run progress"))
        return {str(pid): _judged(counts) for pid, counts in document["properties"].items()}
    except (GateError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _judged(counts: Mapping[str, Any]) -> Judged:
    planned, judged, hits = (int(counts[key]) for key in ("planned", "judged", "hits"))
    given = {"sprt", "paired", "outcomes", "base_outcomes"} & set(counts)
    if not given:
        return Judged(planned, judged, hits)
    if given == {"sprt", "outcomes"}:
        sprt = SprtRule.model_validate(counts["sprt"])
        outcomes = _letters(counts["outcomes"], sprt.max_trials)
        _add_up(judged, hits, outcomes)
        return Judged(planned, judged, hits, sprt, outcomes)
    if given != {"paired", "outcomes", "base_outcomes"}:
        raise ValueError("a rule comes with its outcomes, and one rule only")
    paired = PairedRule.model_validate(counts["paired"])
    outcomes = _letters(counts["outcomes"], paired.max_pairs)
    base = _letters(counts["base_outcomes"], paired.max_pairs)
    _add_up(judged, hits, outcomes + base)
    return Judged(planned, judged, hits, outcomes=outcomes, paired=paired, base_outcomes=base)


def _letters(value: object, cap: int) -> str:
    if not isinstance(value, str) or len(value) > cap or set(value) - {*KINDS, NOT_YET}:
        raise ValueError("outcomes are not one letter per trial")
    return value


def _add_up(judged: int, hits: int, letters: str) -> None:
    if len(letters) - letters.count(NOT_YET) != judged or letters.count(LETTERS[OutcomeKind.HIT]) != hits:
        raise ValueError("outcomes disagree with the counts")
