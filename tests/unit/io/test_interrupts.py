"""gate.io.interrupts: the first SIGINT/SIGTERM stops a command, later ones never cut its clean-up short,
and the commit (books and card) is written whole or not at all."""

from __future__ import annotations

import signal

import pytest

from gate.io import interrupts
from gate.io.interrupts import Interrupted, held, raise_if_pending, routed


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_raises_interrupted_with_its_exit_code(signum: int, code: int) -> None:
    """Under routed(), SIGINT and SIGTERM raise Interrupted, whose exit code is 128 + the signal."""
    with routed(), pytest.raises(Interrupted) as caught:
        signal.raise_signal(signum)
    assert caught.value.exit_code == code
    assert isinstance(caught.value, KeyboardInterrupt)  # every `except KeyboardInterrupt` clean-up runs
    assert interrupts.interrupted()


def test_a_second_signal_does_not_cut_the_clean_up_short() -> None:
    """A signal while the first one's clean-up runs is counted, not raised."""
    cleaned = False
    with routed():
        try:
            signal.raise_signal(signal.SIGINT)
        except Interrupted:
            signal.raise_signal(signal.SIGINT)  # impatient user: must not interrupt the clean-up
            signal.raise_signal(signal.SIGTERM)
            cleaned = True
    assert cleaned


def test_the_handlers_before_are_put_back() -> None:
    """After routed(), SIGINT is again what it was (pytest's KeyboardInterrupt), so an in-process
    command does not take the test session's Ctrl-C."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with routed():
        assert signal.getsignal(signal.SIGINT) is not before[0]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_signal_during_the_commit_is_raised_when_it_ends() -> None:
    """Inside held() a signal is remembered; the block runs to its end, then Interrupted is raised."""
    written: list[str] = []
    with routed(), pytest.raises(Interrupted), held():
        written.append("books")
        signal.raise_signal(signal.SIGINT)
        written.append("card")
    assert written == ["books", "card"]


def test_a_wait_before_anything_is_written_stops_at_once() -> None:
    """raise_if_pending() inside held(), at a point where nothing is written yet, raises the held signal."""
    written: list[str] = []
    with routed(), pytest.raises(Interrupted), held():
        signal.raise_signal(signal.SIGTERM)
        raise_if_pending()  # e.g. queueing for another run's books lock
        written.append("books")
    assert written == []


def test_without_a_signal_nothing_is_raised() -> None:
    """held() and raise_if_pending() are no-ops when no signal came."""
    with routed(), held():
        raise_if_pending()
    assert not interrupts.interrupted()
