"""The check process: the suite's checks run in one long-lived child process per run, never in the
coordinator. A check reads the patch's output, so the patch can make it hang (a catastrophic regex on
crafted output runs in C code that no thread or alarm can stop), exhaust memory or crash the
interpreter; in a child bounded in time (`[suite] check_deadline_s`) and address space (`[suite]
check_memory_mb`, RLIMIT_AS) that is a miss on the trial it was judging, the child is killed and a
fresh one started, and the run goes on. A check's ordinary results and exceptions mean exactly what
they mean in `gate.core.checks.judge`, which the child runs.

The child is a fresh interpreter (`python -I`: no environment variables, no user site, no current
folder on its path), not a fork of the threaded coordinator; it loads the checks module from the
bytes the coordinator read from the oracle (`gate.io.checks.ChecksModule`). Its side is
`gate.io.checkchild`. It lives inside `CheckProcess`'s `with` block: killed and reaped when the
block ends, Ctrl-C and SIGTERM included, and told by the kernel to die with the coordinator.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import gate
from gate.core.checks import Check, Trial, judge, judged_without_check
from gate.core.errors import HarnessError, SuiteError
from gate.core.suite.suite import SuiteConfig
from gate.core.suite.trial import ClockSpec
from gate.core.verdicts.verdict import Band, Outcome, OutcomeKind
from gate.io.checks import ChecksModule

HEADER = 8
PICKLE = pickle.HIGHEST_PROTOCOL
# os.read allocates what it is asked for: a megabyte per answer of a few hundred bytes cost more than
# the rest of the round trip (an mmap each time).
READ_SIZE = 64 * 1024
# The child's answers: a tag byte, then the outcome's JSON, the startup error or the exception's name.
READY, STARTUP_ERROR, OUTCOME, OUT_OF_MEMORY, FAILED = b"R", b"S", b"O", b"M", b"F"
Context = tuple[bytes, Mapping[str, Any], ClockSpec | None]  # a property's fixture, params and clock
STARTUP_S = 60.0  # loading the interpreter and the checks module: the suite's code, trusted, but not endless
MAX_REPLY = 16 * 1024 * 1024  # an outcome is a few hundred bytes; a larger answer is a broken child
# Appends the folder holding the coordinator's own `gate` (an editable install may need it) after
# the standard library and site-packages, then hands over to the child's side.
BOOT = "import sys; sys.path.append(sys.argv[1]); from gate.io.checkchild import main; main(sys.argv[2:])"


class TrialJudge(Protocol):
    """Judges one trial with its property's check."""

    def judge(self, property_id: str, trial: Trial, band: Band) -> Outcome: ...


class InProcess:
    """Checks called in this process, with no deadline or memory bound: what the check process
    replaces in a run (the benchmark's baseline, and tests of the judging itself)."""

    def __init__(self, checks: Mapping[str, Check]) -> None:
        self.checks = checks

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def judge(self, property_id: str, trial: Trial, band: Band) -> Outcome:
        return judge(self.checks[property_id], trial, band)


class _Timeout(Exception):
    pass


class _Gone(Exception):
    """The child stopped taking part: it ended, closed its pipes, or answered more than any outcome."""


class CheckProcess:
    """One run's check process. `judge` sends a trial to the child and waits at most `deadline_s`;
    the child is started when the block begins (loading overlaps the run's start) and again after
    each one killed."""

    def __init__(self, module: ChecksModule, *, deadline_s: float, memory_mb: int) -> None:
        self.module = module
        self.deadline_s = deadline_s
        self.memory_mb = memory_mb
        self.started = 0  # children started so far (each kill starts another)
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._contexts: dict[str, Context] = {}  # what the child holds, by property
        self._lock = threading.Lock()

    def __enter__(self) -> CheckProcess:
        with self._lock:
            self._spawn()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The running child's pid (None: none runs now)."""
        return self._proc.pid if self._proc is not None else None

    def close(self) -> None:
        """Kill and reap the child: it holds nothing that needs a gentler end."""
        with self._lock:
            self._kill()

    def judge(self, property_id: str, trial: Trial, band: Band) -> Outcome:
        """The trial judged by its property's check in the child; a check that does not return in
        time, runs out of memory or takes the child down is a miss on this trial."""
        early = judged_without_check(trial, band)
        if early is not None:
            return early  # the check would not be called: nothing to send
        obs = trial.observation
        index = obs.trial_index
        context = (trial.fixture, trial.params, trial.clock)
        with self._lock:
            self._start()
            # A property's fixture, params and clock go once per child, each trial's observation every
            # time: pickled, which is exact (JSON would lose a NaN duration or a lone surrogate in a path).
            known = self._contexts.get(property_id)
            fresh = None if known is not None and _same(known, context) else context
            request = pickle.dumps((property_id, band.value, fresh, obs), protocol=PICKLE)
            try:
                reply = self._exchange(request, self.deadline_s)
            except _Timeout:
                self._kill()
                return _miss(index, f"check timed out after {self.deadline_s:g}s")
            except _Gone as gone:
                ended = self._kill()
                return _miss(index, f"the check process {str(gone) or 'died'} while judging ({ended})")
            except BaseException:
                self._kill()  # an exchange cut in half (Ctrl-C) leaves the child out of step
                raise
            self._contexts[property_id] = context
            return self._outcome(reply, index)

    def _outcome(self, reply: bytes, index: int) -> Outcome:
        tag, body = reply[:1], reply[1:]
        if tag == OUTCOME:
            try:
                outcome = Outcome.model_validate_json(body)
            except ValueError:
                outcome = None
        elif tag == OUT_OF_MEMORY:
            # The heap may stay fragmented after a MemoryError: the next trial gets a fresh child.
            self._kill()
            return _miss(index, f"check ran out of memory (check_memory_mb = {self.memory_mb})")
        elif tag == FAILED:
            self._kill()
            return _miss(index, f"check did not return: {body[:100].decode('ascii', 'replace')}")
        else:
            outcome = None
        if outcome is None:
            self._kill()
            return _miss(index, "the check process answered something unreadable (it was killed)")
        if outcome.trial_index != index or outcome.kind is OutcomeKind.FAULT or outcome.creditable:
            # `judge` gives none of these for a trial it calls the check on: the child is out of step.
            self._kill()
            return _miss(index, "the check process answered for another trial (it was killed)")
        return outcome

    def _spawn(self) -> None:
        if self._proc is not None:
            return
        # The kernel kills the child when the thread that started it ends: only the main thread's end
        # is the coordinator's, so the child is bound to it only when started there.
        bound = threading.current_thread() is threading.main_thread()
        argv = [sys.executable, "-I", "-c", BOOT, _gate_home(), str(os.getpid()), "1" if bound else "0"]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        except OSError as exc:  # no process to be had (EAGAIN, ENOMEM): the machine's fault, not the patch's
            raise HarnessError(f"cannot start the check process: {exc}") from None
        assert proc.stdin is not None and proc.stdout is not None
        os.set_blocking(proc.stdin.fileno(), False)
        os.set_blocking(proc.stdout.fileno(), False)
        self._proc, self._ready = proc, False
        self.started += 1

    def _start(self) -> None:
        """A child that has loaded the checks; startup faults are the gate's or the suite's, never a miss."""
        self._spawn()
        if self._ready:
            return
        setup = pickle.dumps((self.module, self.memory_mb), protocol=PICKLE)
        try:
            reply = self._exchange(setup, STARTUP_S)
        except _Timeout:
            self._kill()
            raise HarnessError(f"the check process did not load the checks within {STARTUP_S:g}s") from None
        except _Gone:
            raise HarnessError(f"the check process ended while loading the checks ({self._kill()})") from None
        except BaseException:
            self._kill()
            raise
        if reply == READY:
            self._ready = True
            return
        self._kill()
        problem = reply[1:].decode("utf-8", "replace") if reply[:1] == STARTUP_ERROR else "no answer"
        # The coordinator loaded the same bytes: what fails only here is the address space or the isolation.
        field = "suite.check_memory_mb" if "MemoryError" in problem else "suite.checks"
        raise SuiteError(
            f"the check process (python -I, at most check_memory_mb = {self.memory_mb}) cannot load the"
            f" checks: {problem}",
            file=self.module.suite_file,
            field=field,
        )

    def _kill(self) -> str:
        """Kill (SIGKILL) and reap the child if there is one; how it ended, for a detail."""
        proc, self._proc, self._ready = self._proc, None, False
        self._contexts.clear()
        if proc is None:
            return "no process"
        proc.kill()  # a child that already ended is only reaped
        code = proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # nothing left to flush to a reader that is gone
                    pipe.close()
        return _ended(code)

    def _exchange(self, body: bytes, seconds: float) -> bytes:
        """Send one frame and read the answer, all within `seconds` (a child that stops reading or
        never answers cannot hold the coordinator)."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
        pending = memoryview(len(body).to_bytes(HEADER, "big") + body)
        got = bytearray()
        size: int | None = None
        poller = select.poll()
        poller.register(wfd, select.POLLOUT)
        poller.register(rfd, select.POLLIN)
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise _Timeout
            for fd, event in poller.poll(math.ceil(left * 1000)):
                if fd == wfd:
                    if event & (select.POLLERR | select.POLLHUP):
                        raise _Gone
                    try:
                        pending = pending[os.write(wfd, pending) :]
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, ConnectionResetError):
                        raise _Gone from None
                    if not pending:
                        poller.unregister(wfd)
                    continue
                chunk = _read_some(rfd, READ_SIZE if size is None else max(READ_SIZE, HEADER + size - len(got)))
                if chunk is None:
                    continue
                if not chunk:
                    raise _Gone
                got += chunk
                if size is None and len(got) >= HEADER:
                    size = int.from_bytes(got[:HEADER], "big")
                    if size > MAX_REPLY:
                        raise _Gone(f"answered {size} bytes, more than any outcome")
                if size is not None and len(got) >= HEADER + size:
                    return bytes(got[HEADER : HEADER + size])


def _same(known: Context, context: Context) -> bool:
    return all(a is b or a == b for a, b in zip(known, context, strict=True))


def _read_some(fd: int, limit: int) -> bytes | None:
    try:
        return os.read(fd, limit)
    except BlockingIOError:
        return None


def _miss(index: int, detail: str) -> Outcome:
    # Judging the patch's output is what failed: a miss, never a fault that could draw a credit.
    return Outcome(trial_index=index, kind=OutcomeKind.MISS, detail=detail, check_raised=True)


def _ended(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def _gate_home() -> str:
    return str(Path(gate.__file__).resolve().parent.parent)


def judging(module: ChecksModule, config: SuiteConfig) -> CheckProcess:
    """The check process for a suite's `[suite]` table (its deadline and memory bound): every run's judge."""
    return CheckProcess(module, deadline_s=config.check_deadline_s, memory_mb=config.check_memory_mb)


# How a run gets its judge: `judging` unless a test passes its own (tests/support/judging.py).
JudgeFactory = Callable[[ChecksModule, SuiteConfig], AbstractContextManager[TrialJudge]]
