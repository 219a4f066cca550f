"""A command started to be stopped: its stderr read line by line as it comes (so a test waits for the
line that says it reached a phase, not for a fixed time), a signal sent, and how long it took to exit."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

STOP_WITHIN_S = 5.0  # the promise: a signal stops any phase within this
# When set, every measured stop is appended here as a JSON line (the 20-in-a-row check reads them).
STOP_LOG = os.environ.get("PROBEGATE_STOP_LOG")


def record(phase: str, took: float) -> None:
    """Note how long a stop took, for the repeated check (nothing when PROBEGATE_STOP_LOG is unset)."""
    if STOP_LOG:
        with open(STOP_LOG, "a") as log:
            log.write(json.dumps({"phase": phase, "seconds": round(took, 3)}) + "\n")


class Signalled:
    """`cmd` running in its own session, its stderr lines collected by a reader thread."""

    def __init__(self, cmd: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,  # the test's own Ctrl-C is not the command's
        )
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            self._new.put(line)
        self._new.put(None)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, needle: str, timeout: float = 120.0) -> None:
        """Wait until a stderr line holds `needle` (fail, saying what was awaited, if it never comes)."""
        if any(needle in line for line in self.lines):
            return
        give_up = time.monotonic() + timeout
        while (left := give_up - time.monotonic()) > 0:
            try:
                line = self._new.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"exited ({self.proc.wait()}) before printing {needle!r}:\n{self.stderr[-3000:]}")
            if needle in line:
                return
        raise AssertionError(f"no stderr line with {needle!r} within {timeout:.0f}s:\n{self.stderr[-3000:]}")

    def wait_until(self, check: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
        """Poll `check` (a cheap look at the engine) until it holds; fail naming `what` otherwise."""
        give_up = time.monotonic() + timeout
        while not check():
            assert self.proc.poll() is None, f"exited ({self.proc.returncode}) before {what}:\n{self.stderr[-3000:]}"
            assert time.monotonic() < give_up, f"not {what} within {timeout:.0f}s:\n{self.stderr[-3000:]}"
            time.sleep(0.05)

    def stop(self, signum: int = signal.SIGINT, *, times: int = 1) -> float:
        """Send `signum` (`times` times, 50 ms apart) and return the seconds until the process exited;
        fail if it has not exited within twice the promise (it is killed then)."""
        sent = time.monotonic()
        for n in range(times):
            if n:
                time.sleep(0.05)  # an impatient second Ctrl-C, not a wait for anything
            if self.proc.poll() is None:
                self.proc.send_signal(signum)
        try:
            self.proc.wait(timeout=2 * STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(  # noqa: B904 (the timeout itself says nothing more)
                f"still running {2 * STOP_WITHIN_S:.0f}s after {signum!r}:\n{self.stderr[-3000:]}"
            )
        took = time.monotonic() - sent
        self._reader.join(10)  # the last lines it printed
        return took

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
