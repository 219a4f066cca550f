"""The supervisor's side of warm-interpreter trials: it starts a warm parent (worker/box/warmparent.py)
with a fresh PYTHONHASHSEED (or the batch's), hands it each trial's descriptors, pumps the child's pipes
under the deadline, and replaces the parent after PARENT_TRIALS trials, when the tree shadows other
names, when the batch's knobs (hash seed, ASLR, clock mode) differ from the ones it was started with,
or when it is lost.

Stdlib-only, mounted read-only beside supervisor.py and imported by it inside the sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

try:  # inside the sandbox: siblings in the same read-only mount
    from probeproc import PIPE_SIZE, Stream, feed_until, layout
except ImportError:  # imported on the host as worker.box.warmclient
    from worker.box.probeproc import PIPE_SIZE, Stream, feed_until, layout

HERE = os.path.dirname(os.path.abspath(__file__))
# Trials per parent. Hash randomisation is fixed when an interpreter starts, so each parent is one
# PYTHONHASHSEED: 16 gives a 200-trial property 13 seeds, each parent's start shared by 16 trials
# (benchmarks/warm_interpreter.py measures it; docs/explanation/sandbox.md weighs seeds against cost).
PARENT_TRIALS = 16
# A parent's start (the image's imports) falls inside the host's budget for the trial (its deadline plus
# the 15 s grace): one slower than this is a fault of unknown origin, never a timeout charged to the probe.
READY_S = 10.0
REPORT_S = 10.0  # how long a parent may take to answer after its child's end or a deadline kill
MAX_HASH_SEED = 2**32 - 1
# The parent's own environment: what the container gives the probe, minus anything of a trial.
PARENT_ENV = ("PATH", "HOME", "LANG", "TZ", "FAKETIME_DONT_FAKE_MONOTONIC", "FAKETIME_DISABLE_SHM")


@dataclass(frozen=True)
class Knobs:
    """What `gate flakes explain` may hold fixed, as a parent is started with it (a batch's, see
    worker/host/batchfile.py): a parent started with other knobs is replaced."""

    hash_seed: int | None = None  # None: a fresh random seed per parent
    aslr: bool = True
    # The frozen instant as faketimerc writes it ("YYYY-MM-DD HH:MM:SS") when the clock ticks, else None.
    ticking_from: str | None = None

    @classmethod
    def of(cls, batch: dict) -> Knobs:
        seed = batch.get("hash_seed")
        ticking = batch.get("faketime") if batch.get("clock_ticks") else None
        return cls(None if seed is None else int(seed), bool(batch.get("aslr", True)), ticking)


class ParentLost(Exception):
    """The warm parent ended or stopped answering while a trial ran: the probe's doing (it can signal
    the parent, as the same user), never a result to report as the probe's exit."""


class WarmParents:
    """One warm parent at a time for this supervisor, replaced as the module docstring says."""

    def __init__(self, trials_per_parent: int = PARENT_TRIALS) -> None:
        self.trials_per_parent = trials_per_parent
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.skip: frozenset[str] = frozenset()
        self.knobs = Knobs()
        self.served = 0
        self.hash_seed = 0
        self.imported: list[str] = []
        self.refused: list[str] = []
        self.fork_s: float | None = None  # the last trial's fork to its probe's start, for the benchmark

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def ready(self, python: str, env: dict[str, str], skip: set[str], knobs: Knobs | None = None) -> bool:
        """Make sure a parent fit for a trial runs (started with `python` in `env`'s PATH and with `knobs`,
        never having imported a name in `skip`); whether one was started (False when reused)."""
        knobs = knobs or Knobs()
        fit = self.served < self.trials_per_parent and frozenset(skip) == self.skip and knobs == self.knobs
        # A parent gone between trials (nothing of a trial runs then) is replaced, never blamed on the next one.
        if self.proc is not None and fit and self.proc.poll() is None:
            return False
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if knobs.hash_seed is None:
            self.hash_seed = 1 + int.from_bytes(os.urandom(4), "big") % MAX_HASH_SEED  # 0 would turn it off
        else:
            self.hash_seed = knobs.hash_seed
        parent_env = {key: env[key] for key in PARENT_ENV if key in env}
        parent_env.update(PYTHONHASHSEED=str(self.hash_seed), PYTHONDONTWRITEBYTECODE="1")
        if knobs.ticking_from is not None:
            # A forked child inherits libfaketime's start instant, so a parent reading the ticking
            # faketimerc would hand every child a clock already run on by the parent's age. This parent
            # stands still at the instant instead, reading it from FAKETIME (never the file), with no
            # cache: each child's "@" FAKETIME (warmparent.become_probe) is then a new setting, and
            # libfaketime starts that child's clock at the instant on its first read.
            parent_env.update(FAKETIME=knobs.ticking_from, FAKETIME_NO_CACHE="1")
        names = os.memfd_create("probegate-skip")  # inherited through pass_fds
        os.write(names, "\n".join(sorted(skip)).encode())
        os.lseek(names, 0, os.SEEK_SET)
        argv = [python, "-s", "-P", f"{HERE}/warmparent.py", str(theirs.fileno()), str(names)]
        try:
            # Its children are forks that share its layout: the parent is what must start without ASLR.
            with layout(knobs.aslr):
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd="/",
                    env=parent_env,
                    pass_fds=(theirs.fileno(), names),
                )
        finally:
            theirs.close()
            os.close(names)
        self.sock, self.skip, self.knobs, self.served = ours, frozenset(skip), knobs, 0
        try:
            hello = self._answer(READY_S)
        except ParentLost as exc:
            raise OSError(f"warm parent did not start: {exc}") from None
        if not hello.get("ready"):
            self.stop()
            raise OSError(f"warm parent did not start: {hello}")
        self.imported, self.refused = list(hello["imported"]), list(hello["refused"])
        return True

    def stop(self) -> None:
        """End the parent (it holds no trial's state: nothing to wait for)."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(
        self, request: dict, stdin, out: Stream, err: Stream, deadline_s: float
    ) -> tuple[bool, int, tuple[float, float, int], tuple[int, int], float]:
        """Run one trial in a child of the parent: (timed_out, wait status, (user s, sys s, max rss kB),
        the read ends of stdout and stderr (for draining after), duration). Raises ParentLost."""
        assert self.sock is not None
        self.served += 1
        self.fork_s = None
        memfd = os.memfd_create("probegate-request", os.MFD_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        for fd in (out_r, err_r):
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, 1031, PIPE_SIZE)  # F_SETPIPE_SZ
        started = time.monotonic()
        try:
            os.write(memfd, json.dumps(request).encode())
            socket.send_fds(self.sock, [b"go"], [memfd, stdin.fileno(), out_w, err_w])
        except OSError as exc:
            raise ParentLost(f"the warm parent took no trial: {exc}") from exc
        finally:
            for fd in (memfd, out_w, err_w):
                os.close(fd)
        pid = self._answer(REPORT_S).get("pid")
        if not isinstance(pid, int):
            raise ParentLost("the warm parent forked no child")
        timed_out, answer = self._pump(pid, {out_r: out, err_r: err}, started, deadline_s)
        duration = time.monotonic() - started
        usage = (float(answer["user"]), float(answer["sys"]), int(answer["rss"]))
        fork = answer.get("fork")
        self.fork_s = float(fork) if isinstance(fork, (int, float)) and 0 <= fork <= duration else None
        return timed_out, int(answer["status"]), usage, (out_r, err_r), duration

    def _pump(self, pid: int, streams: dict[int, Stream], started: float, deadline_s: float) -> tuple[bool, dict]:
        """Drain the pipes until the parent reports the child's end, or kill the child's process group
        at the deadline and then take the parent's report."""
        assert self.sock is not None
        if feed_until(streams, self.sock.fileno(), started + deadline_s):
            return False, self._answer(REPORT_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        return True, self._answer(REPORT_S)

    def _answer(self, timeout_s: float) -> dict:
        assert self.sock is not None
        self.sock.settimeout(timeout_s)
        try:
            data = self.sock.recv(1 << 20)
        except OSError as exc:
            self.stop()
            raise ParentLost(f"the warm parent did not answer: {type(exc).__name__}: {exc}") from exc
        if not data:
            self.stop()
            raise ParentLost("the warm parent ended while a trial ran")
        answer = json.loads(data)
        if "error" in answer:
            self.stop()
            raise ParentLost(f"the warm parent refused the trial: {answer['error']}")
        return answer
