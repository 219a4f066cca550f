"""Ctrl-C and SIGTERM for long commands: the first signal stops the command at once, and what must not be
left half-done (the books and the card they agree with) is written whole or not at all.

`routed()` (the command line, main thread) makes SIGINT and SIGTERM raise `Interrupted` in the main
thread; everything the run started is then removed by its own `except`/`finally` blocks (the executor's
`abort`). A second signal while that clean-up runs is counted, not raised: a clean-up cut in half would
leave containers behind, and it is bounded (see worker/host/runcontainers.py `drop`).

`held()` marks the commit: while it is active a signal is remembered instead of raised, and raised
when the commit ends. A wait inside it that has written nothing yet (the books' lock) calls
`raise_if_pending()` so that Ctrl-C still stops a run that queues for another run's books.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The command was told to stop by `signum`; the exit code is 128 + signum (130 for Ctrl-C)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    raised: int | None = None  # the signal already raised: later ones only count
    holding = 0  # nesting depth of `held()`
    pending: int | None = None  # a signal that arrived while held
    extra = 0  # signals after the first (for the message, and tests)


_state = _State()


@contextlib.contextmanager
def routed() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` in the block (main thread only; elsewhere nothing
    changes); the handlers before it are put back after it, so a test can call the command in-process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in SIGNALS}
    _state.raised, _state.pending, _state.holding, _state.extra = None, None, 0, 0
    for signum in SIGNALS:
        signal.signal(signum, _on_signal)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def interrupted() -> bool:
    """Whether a signal stopped the last command run under `routed()`."""
    return _state.raised is not None


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state.raised is not None or _state.pending is not None:
        _state.extra += 1  # clean-up, or a commit, is under way: it finishes by itself, quickly
        return
    if _state.holding:
        _state.pending = signum
        return
    _state.raised = signum
    raise Interrupted(signum)


def raise_if_pending() -> None:
    """Inside `held()`, at a point where nothing is written yet: stop now if a signal came."""
    if _state.pending is not None and _state.raised is None:
        signum, _state.pending = _state.pending, None
        _state.raised = signum
        raise Interrupted(signum)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM over a block that must be written whole; a held signal is raised at its end."""
    _state.holding += 1
    try:
        yield
    finally:
        _state.holding -= 1
    if not _state.holding:
        raise_if_pending()
