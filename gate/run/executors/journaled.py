"""Durable runs: every observation a run gathers is appended to its journal (in the state folder,
gate.io.journal) as it arrives, and `gate run --resume` picks an interrupted run up from there.

A resume keeps the run id, refuses (JournalError, exit 65) a journal bound to another run, suite, tree,
seal or image, or holding a trial this run would not plan with that spec, and replays every stored
observation through the same wave loop, canary search and checks as a fresh one: the tallies, and so the
waves a sequential rule asks for, are those the interrupted run had. Only trials with no stored
observation run again. Nothing is committed before the end: the books, the flake history and the
card are written once, by the resumed run, and the journal then goes. A journal that reached its
commit line is refused, so a run is never committed twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.core.card.card import HarnessEvent
from gate.core.errors import JournalError
from gate.core.suite.journal import Journal, JournalHeader, check_trials, mismatch, spec_digest, trial_line
from gate.core.suite.suite import Suite
from gate.core.suite.trial import Limits, Observation, Side, TrialKey, TrialSpec
from gate.io.journal import JournalWriter, discard_journal, journal_path, new_journal, read_journal
from gate.io.liveprogress import progress_path
from gate.io.snapshot import LocalInputs
from gate.run.executors.base import Executor

# The spec this run plans for (property, index, side) carrying `canary`, for a given image ID (None: no such trial).
SpecOf = Callable[[str, str, int, str, Side], TrialSpec | None]


@dataclass
class RunJournal:
    """One run's journal: the stored one being resumed (if any) and the writer once the run is bound."""

    path: Path
    resumed: Journal | None = None
    writer: JournalWriter | None = None
    expected: JournalHeader | None = None
    reused: int = 0
    rerun: int = 0

    @classmethod
    def start(cls, card: Path, state_dir: Path, *, resume: bool, note: Callable[[str], None]) -> RunJournal:
        """The journal of the run writing `card`; with `resume`, the stored one read and locked now (before
        any container), refused when it reached its commit. Without one to resume, the run starts fresh."""
        path = journal_path(card, state_dir)
        if not resume:
            if discard_journal(path):
                note(f"gate: removed the journal of an interrupted run at {path} (gate run --resume continues one)")
            progress_path(path).unlink(missing_ok=True)
            return cls(path)
        found = read_journal(path)
        if found is None:
            note(f"gate: no run journal at {path}: nothing to resume, every trial runs")
            return cls(path)
        journal, writer = found
        if journal.committed:
            writer.close()
            raise JournalError(
                f"run {journal.header.run_id} reached its commit (its books may be written): remove the journal"
                " and run again",
                file=str(path),
            )
        return cls(path, resumed=journal, writer=writer)

    @property
    def run_id(self) -> str | None:
        """The resumed run's id (a resume keeps it); None for a fresh run."""
        return self.resumed.header.run_id if self.resumed else None

    def stored_canary(self, property_id: str, index: int, side: Side) -> str | None:
        if self.resumed is None or self.expected is None:
            return None
        entry = self.resumed.stored.get((self.expected.run_id, property_id, index, side))
        return None if entry is None else entry.canary

    def expect(self, header: JournalHeader) -> None:
        """The run is known but for its image: a resumed journal bound to anything else is refused now."""
        self.expected = header
        if self.resumed is not None and (diff := mismatch(self.resumed.header, header, image=False)) is not None:
            self.close()
            raise JournalError(f"not this run's journal: {diff}", file=str(self.path))

    def bind(self, image: str, image_id: str, spec_of: Callable[[str, int, str, Side], TrialSpec | None]) -> None:
        """The image is known: check the resumed journal's image and every stored trial's spec, or start a
        fresh journal with this run's header."""
        assert self.expected is not None, "expect() comes first"
        self.expected = self.expected.model_copy(update={"image": image, "image_id": image_id})
        try:
            if self.resumed is None:
                self.writer = new_journal(self.path, self.expected)
                return
            if (diff := mismatch(self.resumed.header, self.expected)) is not None:
                raise JournalError(f"not this run's journal: {diff}")
            check_trials(self.resumed, spec_of)
        except JournalError as exc:
            self.close()
            raise JournalError(exc.message, file=str(self.path)) from None

    def executor(self, inner: Executor, spec_of: SpecOf) -> JournaledExecutor:
        """`inner` with every primary observation journaled and, on a resume, stored ones replayed."""
        return JournaledExecutor(inner, self, spec_of)

    def record(self, spec: TrialSpec, obs: Observation) -> None:
        if self.writer is not None:
            self.writer.append(trial_line(self.writer.chain, spec, obs))

    def event(self) -> HarnessEvent | None:
        """What the card says of a resume (None: the run was not resumed)."""
        if self.resumed is None:
            return None
        detail = f"resumed run: {self.reused} trial(s) reused from {self.path.name}, {self.rerun} run again"
        return HarnessEvent(kind="resumed", detail=detail)

    def summary(self) -> str | None:
        if self.resumed is None:
            return None
        return f"gate: resumed run {self.resumed.header.run_id}: {self.reused} trial(s) reused, {self.rerun} re-run"

    def commit(self) -> None:
        """The books are about to be written: from now on this journal can never be resumed."""
        if self.writer is not None:
            self.writer.commit()

    def done(self) -> None:
        """The run is committed (books and card written): the journal goes, and its judged progress."""
        if self.writer is not None:
            self.writer.remove()
            self.writer = None
        progress_path(self.path).unlink(missing_ok=True)

    def close(self) -> None:
        """Let go of the journal (it stays on disk for a resume)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class JournaledExecutor:
    """An executor that journals what its inner executor observes and, on a resume, answers stored trials
    from the journal instead of running them; everything else (cross-checks included) goes to `inner`."""

    def __init__(self, inner: Executor, journal: RunJournal, spec_of: SpecOf) -> None:
        self.inner, self.journal, self.spec_of = inner, journal, spec_of

    @property
    def image(self) -> str:
        return self.inner.image

    @property
    def events(self) -> list[HarnessEvent]:
        return self.inner.events

    def __getattr__(self, name: str) -> Any:
        # run_elsewhere, untrusted_workers…: what the run asks an executor for when it has it.
        return getattr(self.inner, name)

    def image_id(self) -> str:
        image_id = self.inner.image_id()
        self.journal.bind(self.inner.image, image_id, lambda p, i, c, s: self.spec_of(image_id, p, i, c, s))
        return image_id

    def open(self, run_id: str, limits: Limits) -> None:
        self.inner.open(run_id, limits)

    def close(self, run_id: str) -> None:
        self.inner.close(run_id)

    def abort(self, run_id: str) -> None:
        self.inner.abort(run_id)

    def run(self, specs: Sequence[TrialSpec], inputs: LocalInputs) -> Iterator[Observation]:
        stored = self.journal.resumed.stored if self.journal.resumed else {}
        fresh: dict[TrialKey, TrialSpec] = {}
        replayed: list[Observation] = []
        for spec in specs:
            entry = stored.get(spec.key)
            if entry is None:
                fresh[spec.key] = spec
                continue
            if spec_digest(spec) != entry.spec_digest:  # bound at `bind`; the planner must agree
                detail = f"{spec.property_id} trial {spec.trial_index} was stored for another spec than this run's"
                raise JournalError(detail, file=str(self.journal.path))
            replayed.append(entry.observation)
        self.journal.reused += len(replayed)
        self.journal.rerun += len(fresh)
        yield from replayed
        if not fresh:
            return
        try:
            for obs in self.inner.run(list(fresh.values()), inputs):
                spec = fresh.pop(obs.key, None)
                if spec is not None:  # a duplicate or a stray is the wave loop's to report, not to store
                    self.journal.record(spec, obs)
                yield obs
        finally:
            if self.journal.writer is not None:
                self.journal.writer.sync()


def journal_header(
    *, run_id: str, suite: Suite, checks: bytes | None, tree: str, seal: str, properties: Sequence[str]
) -> JournalHeader:
    """The header of this run (its image filled in at `bind`); `checks` is the checks module's source as the
    oracle read it (None: every check is builtin)."""
    return JournalHeader(
        run_id=run_id,
        suite=suite.sha256,
        checks="" if checks is None else hashlib.sha256(checks).hexdigest(),
        tree=tree,
        seal=seal,
        image="",
        image_id="",
        properties=tuple(properties),
    )
