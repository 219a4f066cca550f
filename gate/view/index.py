"""The cards `gate view` lists: found by walking the card folders, each read once for its header
fields (status, suite, base, tree, rows by kind) and cached by path, modification time and size, so a
listing of a thousand cards reads only those that changed. A file that does not parse as a card is one
row saying so."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, ValidationError

from gate.core.errors import GateError
from gate.core.escaping import one_line
from gate.io.inputs import read_input

SIGNATURE = ".dsse.json"  # gate.io.cardsig.SUFFIX, written out: listing loads no signing code
# The gate's other JSON files (gate.core.report.proposals.FREEZE_PROPOSAL written out: listing loads no card model).
NOT_CARDS = frozenset({"ledger.json", "freeze-proposal.json", "workers.json", "calibration.json"})
SKIP_DIRS = frozenset({"evidence", "journals", ".git", "node_modules", "__pycache__"})
MAX_DEPTH = 3  # card folders hold cards, or one folder per run holding its card


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str
    kind: str
    durations_s: tuple[float, ...] = ()


class _Head(BaseModel):
    """The few fields a listing needs; the rest of the card is left unvalidated until its page opens."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    run_id: str
    created_at: AwareDatetime
    suite: str
    base_rev: str | None = None
    tree_digest: str
    status: str
    exit_code: int
    properties: tuple[_Row, ...]


@dataclass(frozen=True)
class RunSummary:
    """One card as the runs page lists it; `problem` set: the file is not a readable card."""

    key: str
    path: Path
    mtime: float
    run_id: str = ""
    created_at: datetime | None = None
    suite: str = ""
    base_rev: str | None = None
    tree_digest: str = ""
    status: str = ""
    exit_code: int | None = None
    kinds: tuple[tuple[str, int], ...] = ()
    properties: tuple[str, ...] = ()
    trial_s: float = 0.0  # the trials' summed durations: the card keeps no wall time of the run
    signed: bool = False
    problem: str = ""


def path_key(path: Path) -> str:
    """The key a page names a file by: a digest of its path, so no file name reaches a URL."""
    return hashlib.sha256(os.fsencode(path)).hexdigest()[:16]


def _candidates(folder: Path, depth: int = 0) -> Iterator[tuple[os.DirEntry[str], frozenset[str]]]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    names = frozenset(entry.name for entry in entries)
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                if depth < MAX_DEPTH and entry.name not in SKIP_DIRS:
                    yield from _candidates(Path(entry.path), depth + 1)
            elif (
                entry.is_file(follow_symlinks=False)
                and entry.name.endswith(".json")
                and not entry.name.endswith(SIGNATURE)
                and entry.name not in NOT_CARDS
            ):
                yield entry, names
        except OSError:
            continue


def summarise(path: Path, mtime: float, signed: bool) -> RunSummary | None:
    """The listing's fields of the card at `path`; None when the file is JSON of another kind."""
    key = path_key(path)
    try:
        data = read_input(path, "verdict card")
    except GateError as exc:
        return RunSummary(key, path, mtime, problem=one_line(exc.message))
    if b'"run_id"' not in data and b'"properties"' not in data:
        return None  # another file of the gate's, or someone else's: not listed
    try:
        head = _Head.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        return RunSummary(key, path, mtime, signed=signed, problem=one_line(f"{where}: {first['msg']}"))
    kinds = Counter(row.kind for row in head.properties)
    return RunSummary(
        key,
        path,
        mtime,
        run_id=head.run_id,
        created_at=head.created_at,
        suite=head.suite,
        base_rev=head.base_rev,
        tree_digest=head.tree_digest,
        status=head.status,
        exit_code=head.exit_code,
        kinds=tuple(sorted(kinds.items())),
        properties=tuple(row.id for row in head.properties),
        trial_s=sum(sum(row.durations_s) for row in head.properties),
        signed=signed,
    )


class CardIndex:
    """Every card under the folders, newest first; each file read again only when it changed."""

    def __init__(self, folders: tuple[Path, ...]) -> None:
        self.folders = folders
        self._cache: dict[Path, tuple[int, int, bool, RunSummary | None]] = {}
        self._lock = threading.Lock()

    def runs(self) -> list[RunSummary]:
        """The cards as they stand now, newest first (an unreadable one by its file's time)."""
        found: list[RunSummary] = []
        seen: set[Path] = set()
        for folder in self.folders:
            for entry, names in _candidates(folder):
                path = Path(entry.path)
                if path in seen:
                    continue
                seen.add(path)
                if (summary := self._summary(entry, names)) is not None:
                    found.append(summary)
        with self._lock:
            for gone in set(self._cache) - seen:
                del self._cache[gone]
        return sorted(found, key=_newest_first)

    def _summary(self, entry: os.DirEntry[str], names: frozenset[str]) -> RunSummary | None:
        path = Path(entry.path)
        try:
            stat = entry.stat(follow_symlinks=False)
        except OSError:
            return None
        signed = entry.name + SIGNATURE in names
        with self._lock:
            cached = self._cache.get(path)
        if cached is not None and cached[:3] == (stat.st_mtime_ns, stat.st_size, signed):
            return cached[3]
        summary = summarise(path, stat.st_mtime, signed)
        with self._lock:
            self._cache[path] = (stat.st_mtime_ns, stat.st_size, signed, summary)
        return summary

    def find(self, key: str) -> RunSummary | None:
        """The card a page names by its key."""
        return next((run for run in self.runs() if run.key == key), None)

    def by_run_id(self, run_id: str) -> RunSummary | None:
        """The newest card of the run `run_id`, once it is written."""
        return next((run for run in self.runs() if run.run_id == run_id and not run.problem), None)


def _newest_first(run: RunSummary) -> tuple[float, str]:
    when = run.created_at.timestamp() if run.created_at is not None else run.mtime
    return (-when, str(run.path))
