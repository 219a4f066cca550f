"""A run in progress, from its journal in the state folder: per property, the trials observed so far,
how they ended and how long they took; beside it, from the run's progress file (gate.io.liveprogress),
what its checks judged so far: hits, the hit rate and, for a property judged by an SPRT or the paired
rule, the path of its log-likelihood ratio. The journal is read without a lock or a write while the run
appends to it. Nothing the journal holds of the probe's output or the trials' canaries is shown: the
checks have not judged it yet, and the canaries stay the run's secret until it commits."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.errors import GateError
from gate.core.escaping import one_line
from gate.view.index import path_key

if TYPE_CHECKING:  # the journal's models load with the first journal read: the runs page starts without them
    from gate.core.report.html_paired import PairedPath
    from gate.core.report.html_sprt import SprtPath
    from gate.core.suite.journal import Journal
    from gate.core.suite.trial import Observation
    from gate.io.liveprogress import Judged

SUFFIX = ".journal"  # gate.io.journal.SUFFIX, written out for the same reason

FIELDS = ("trials", "judged", "hits", "hit_rate", "base", "exit_0", "exit_other", "timeouts", "faults", "slowest_s")


@dataclass(frozen=True)
class LiveRow:
    """One property of a run in progress: its observed trials so far, by how they ended, and for a property
    judged by an SPRT or the paired rule, the path of its judged trials or pairs so far (None: no such rule,
    or nothing judged yet)."""

    property_id: str
    cells: dict[str, str]  # FIELDS -> text, what the page and its stream show
    path: SprtPath | PairedPath | None = None


@dataclass(frozen=True)
class LiveRun:
    """A journal as read now; `problem` set: it could not be read."""

    key: str
    path: Path
    mtime: float
    run_id: str = ""
    rows: tuple[LiveRow, ...] = ()
    total: int = 0
    committed: bool = False
    problem: str = ""


def journals(folder: Path | None) -> list[Path]:
    """The journals in the state folder's `journals/`, newest first."""
    if folder is None:
        return []
    try:
        found = [Path(e.path) for e in os.scandir(folder) if e.name.endswith(SUFFIX) and e.is_file()]
    except OSError:
        return []
    return sorted(found, key=_mtime, reverse=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _row(property_id: str, observed: list[Observation], judged: Judged | None) -> LiveRow:
    from gate.io.liveprogress import Judged

    judged = judged or Judged()
    patch = [o for o in observed if o.side.value == "patch"]
    durations = [o.duration_s for o in observed]
    done, hits = judged.judged, judged.hits
    cells = {
        "trials": str(len(patch)),
        "judged": f"{done} of {judged.planned}" if judged.planned else str(done),
        "hits": str(hits),
        "hit_rate": _rate(hits, done),
        "base": str(len(observed) - len(patch)),
        "exit_0": str(sum(o.exit_code == 0 and not o.timed_out and o.fault is None for o in observed)),
        "exit_other": str(sum(o.exit_code not in (0, None) and not o.timed_out for o in observed)),
        "timeouts": str(sum(o.timed_out for o in observed)),
        "faults": str(sum(o.fault is not None for o in observed)),
        "slowest_s": f"{max(durations):.3g}" if durations else "-",
    }
    return LiveRow(property_id, cells, _path(judged))


def _path(judged: Judged) -> SprtPath | PairedPath | None:
    """The sequential test's path so far, in trial-index order, as the card's page draws it: the SPRT's over
    the judged trials, or the paired test's over the pairs judged on both trees."""
    if judged.sprt is not None:
        from gate.core.report.html_sprt import kinds_path

        kinds = judged.judged_kinds()
        return kinds_path(judged.sprt, kinds) if kinds else None
    if judged.paired is not None:
        from gate.core.report.html_paired import paired_path
        from gate.core.suite.trial import Side
        from gate.core.verdicts.verdict import Outcome

        base, patch = (
            [Outcome(trial_index=index, kind=kind) for index, kind in judged.by_index(side)]
            for side in (Side.BASE, Side.PATCH)
        )
        path = paired_path(judged.paired, base, patch)
        return path if path.points else None
    return None


def _rate(hits: int, judged: int) -> str:
    """The hit rate so far with its 95% Wilson interval, which narrows as waves are judged."""
    from gate.core.verdicts.bands import wilson

    if not 0 <= hits <= judged or judged == 0:
        return "-"
    interval = wilson(hits, judged)
    return f"{hits / judged:.2f} [{interval.low:.2f}, {interval.high:.2f}]"


def live_rows(journal: Journal, judged: Mapping[str, Judged] | None = None) -> tuple[LiveRow, ...]:
    """One row per property the run covers, in suite order, then any property only the journal names; `judged`:
    what the run's checks made of its trials so far (gate.io.liveprogress), by property."""
    judged = judged or {}
    by_property: dict[str, list[Observation]] = {pid: [] for pid in journal.header.properties}
    for stored in journal.stored.values():
        by_property.setdefault(stored.observation.property_id, []).append(stored.observation)
    return tuple(_row(pid, observed, judged.get(pid)) for pid, observed in by_property.items())


def read_live(path: Path) -> LiveRun:
    """The run in progress whose journal is at `path`, as it stands."""
    from gate.io.journal import peek_journal
    from gate.io.liveprogress import progress_path, read_progress

    key, mtime = path_key(path), _mtime(path)
    try:
        journal = peek_journal(path)
    except GateError as exc:
        return LiveRun(key, path, mtime, problem=one_line(exc.message))
    if journal is None:
        return LiveRun(key, path, mtime, problem="the journal is gone: the run ended or was stopped")
    return LiveRun(
        key,
        path,
        mtime,
        run_id=journal.header.run_id,
        rows=live_rows(journal, read_progress(progress_path(path))),
        total=len(journal.stored),
        committed=journal.committed,
    )
