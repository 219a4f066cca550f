"""A run's judged progress file (gate.io.liveprogress): counts by property, rewritten at most every so often
and always at the end, read back as counts or as nothing when it is missing or garbled."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.core.verdicts.verdict import OutcomeKind
from gate.io.liveprogress import ProgressFile, progress_path, read_progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_counts_are_written_at_most_every_so_often_and_whole_at_the_end(tmp_path: Path) -> None:
    """Planned, judged and hits per property; a plan and the end are written at once, judged trials at most
    once a second."""
    path = progress_path(tmp_path / "card.json-0123.journal")
    clock = Clock()
    progress = ProgressFile(path, every_s=1.0, clock=clock)
    progress.planned("p", 10)
    progress.planned("q", 5)  # a plan is written at once, however soon after the last write
    assert read_progress(path) == {
        "p": {"planned": 10, "judged": 0, "hits": 0},
        "q": {"planned": 5, "judged": 0, "hits": 0},
    }
    progress.done("p", OutcomeKind.HIT)
    progress.done("p", OutcomeKind.MISS)
    assert read_progress(path)["p"]["judged"] == 0  # within the second: not rewritten yet
    clock.now = 1.5
    progress.done("p", OutcomeKind.FAULT)
    assert read_progress(path)["p"] == {"planned": 10, "judged": 3, "hits": 1}
    progress.done("q", OutcomeKind.HIT)
    progress.finished()
    assert read_progress(path) == {
        "p": {"planned": 10, "judged": 3, "hits": 1},
        "q": {"planned": 5, "judged": 1, "hits": 1},
    }
    assert path.name == "card.json-0123.journal.progress"


@pytest.mark.parametrize(
    "text", ["", "not json", "[]", '{"properties": 3}', '{"properties": {"p": {"planned": "x"}}}', '{"other": 1}']
)
def test_a_missing_or_garbled_file_reads_as_nothing(tmp_path: Path, text: str) -> None:
    """Whatever is at the path, reading it never raises: no counts instead."""
    path = tmp_path / "x.progress"
    assert read_progress(path) == {}
    path.write_text(text)
    assert read_progress(path) == {}


def test_a_folder_that_cannot_be_written_costs_the_run_nothing(tmp_path: Path) -> None:
    """The file is the view's copy: a write that fails is dropped, the run's own calls never raise."""
    (tmp_path / "blocked").write_text("a file where the folder would be")
    progress = ProgressFile(tmp_path / "blocked" / "x.progress")
    progress.planned("p", 1)
    progress.done("p", OutcomeKind.HIT)
    progress.finished()


def test_a_fifo_where_the_file_should_be_never_blocks_the_reader(tmp_path: Path) -> None:
    """Something planted at the path that is no regular file reads as nothing, at once."""
    import os

    path = tmp_path / "x.progress"
    os.mkfifo(path)
    assert read_progress(path) == {}
