"""Binding a started container: its faketimerc is rewritten in place, never truncated, and its
tree is laid out by links or copies; the idle containers kept between batches. No Docker needed for these."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.suite.trial import ClockSpec, Limits
from worker.host.warm import UNBOUND_CLOCK, BoundShape, IdleContainers, clock_line, fill_tree, write_in_place


def test_rewrite_keeps_the_inode(tmp_path: Path) -> None:
    """The bound clock lands in the same inode, which is what a single-file bind mount shows."""
    path = tmp_path / "faketimerc"
    path.write_text(UNBOUND_CLOCK + "\n")
    inode = path.stat().st_ino
    write_in_place(path, b" 2026-03-01 00:00:00\n")
    assert path.stat().st_ino == inode and path.read_text() == " 2026-03-01 00:00:00\n"


def test_rewrite_of_another_length_is_refused(tmp_path: Path) -> None:
    """A rewrite that would change the length (and so need a truncate) raises instead of racing readers."""
    path = tmp_path / "faketimerc"
    path.write_text(UNBOUND_CLOCK + "\n")
    with pytest.raises(OSError, match="in place"):
        write_in_place(path, b"+0\n")
    assert path.read_text() == UNBOUND_CLOCK + "\n"


@given(
    st.datetimes(min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)),
    st.booleans(),
)
def test_every_clock_fits_the_placeholder(instant: datetime, ticks: bool) -> None:
    """Every instant's faketimerc line, frozen or ticking, has the placeholder's length, so binding never truncates."""
    assert len(clock_line(ClockSpec(frozen_at=instant), ticks)) == len(UNBOUND_CLOCK + "\n")


def test_the_clock_modes_differ_in_their_first_byte_only() -> None:
    """A frozen line is the instant after a space, a ticking one after "@" (libfaketime's start-at mode)."""
    clock = ClockSpec(frozen_at=datetime(2026, 3, 1, tzinfo=UTC))
    assert clock_line(clock, ticks=False) == b" 2026-03-01 00:00:00\n"
    assert clock_line(clock, ticks=True) == b"@2026-03-01 00:00:00\n"


def test_tree_is_laid_out_whole(tmp_path: Path) -> None:
    """fill_tree reproduces files, nested directories and symlinks of the snapshot in the target."""
    tree, dst = tmp_path / "tree", tmp_path / "src"
    (tree / "pkg").mkdir(parents=True)
    (tree / "probe.py").write_text("print(1)\n")
    (tree / "pkg" / "mod.py").write_text("X = 1\n")
    os.symlink("probe.py", tree / "link.py")
    dst.mkdir()
    fill_tree(tree, dst)
    assert (dst / "probe.py").read_text() == "print(1)\n"
    assert (dst / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert os.readlink(dst / "link.py") == "probe.py"


class _Stream:
    def __init__(self, ended: bool) -> None:
        self.ended = ended


class _Idle:
    """A warm container as IdleContainers sees it: its run, shape, stream and whether it was removed."""

    def __init__(self, run_id: str, *, ended: bool = False) -> None:
        self.run_id = run_id
        self.shape = BoundShape(run_id, "tree", ClockSpec(frozen_at=datetime(2026, 1, 1, tzinfo=UTC)), Limits(), "img")
        self.stream = _Stream(ended)
        self.idle_since = 0.0
        self.removed = False

    def usable(self) -> bool:
        return not self.stream.ended

    def remove(self) -> None:
        self.removed = True


def test_dead_containers_of_earlier_runs_give_their_places_to_a_new_runs() -> None:
    """Earlier runs still open (a worker's janitor has not closed them) whose containers were removed do not keep
    a new run's container from waiting for its next batch; live ones still count towards the limit."""
    idle = IdleContainers(max_idle=2)
    for run_id in ("old-1", "old-2", "new"):
        idle.open(run_id)
    dead = [_Idle("old-1"), _Idle("old-2")]
    assert all(idle.checkin(w) for w in dead)  # type: ignore[arg-type]
    for w in dead:
        w.stream.ended = True  # the close-run command removed them
    fresh = _Idle("new")
    assert idle.checkin(fresh)  # type: ignore[arg-type]
    assert all(w.removed for w in dead)
    assert idle.checkout(fresh.shape) is fresh  # type: ignore[arg-type]
    live = [_Idle("old-1"), _Idle("old-2")]
    assert all(idle.checkin(w) for w in live)  # type: ignore[arg-type]
    assert not idle.checkin(_Idle("new"))  # type: ignore[arg-type]
