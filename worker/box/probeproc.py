"""One probe process inside the sandbox: spawned as the OOM killer's first pick, its two pipes
drained under a deadline into capped, digested, canary-scanned streams, and reaped with rusage.

Stdlib-only, mounted read-only beside supervisor.py and imported by it inside the sandbox.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import hashlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator

CHUNK = 1 << 20
PIPE_SIZE = 1 << 20  # the unprivileged maximum: fewer wake-ups for a flooding probe
OOM_SCORE_ADJ = "/proc/self/oom_score_adj"
ADDR_NO_RANDOMIZE = 0x0040000  # the personality flag `setarch -R` sets
PER_QUERY = 0xFFFFFFFF  # personality() with this argument only reads the current one


class Stream:
    """One output pipe: the first `cap` bytes kept, the full length and sha256 counted, and a scan
    of the whole stream (not just the head) for the canary."""

    def __init__(self, cap: int, canary: bytes) -> None:
        self.cap = cap
        self.head = bytearray()
        self.length = 0
        self.digest = hashlib.sha256()
        self.canary = canary
        self.tail = b""  # the last len(canary)-1 bytes, so a canary split across reads is seen
        self.canary_seen = False

    def feed(self, chunk: bytes) -> None:
        self.length += len(chunk)
        self.digest.update(chunk)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        if self.canary and not self.canary_seen:
            window = self.tail + chunk
            self.canary_seen = self.canary in window
            keep = len(self.canary) - 1
            self.tail = window[len(window) - keep :] if keep else b""

    def report(self) -> dict:
        data = base64.b64encode(bytes(self.head)).decode("ascii")
        return {"data_b64": data, "length": self.length, "sha256": self.digest.hexdigest()}


def oom_kills() -> int:
    """The container's OOM-kill count (cgroup v1 or v2); a rise during a trial means the probe was OOM-killed."""
    for path, key in (
        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
        ("/sys/fs/cgroup/memory.events", "oom_kill"),
    ):
        with contextlib.suppress(OSError), open(path) as handle:
            for line in handle:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    return -1


def open_oom_score() -> int:
    """Our oom_score_adj, opened before harden(): once undumpable, /proc/self is root's and not ours to open."""
    return os.open(OOM_SCORE_ADJ, os.O_RDWR | os.O_CLOEXEC)


def set_oom_score(fd: int, value: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    if os.write(fd, value) != len(value):
        raise OSError(f"short write of oom_score_adj {value!r}")


def spawn(argv: list[str], stdin, work: str, env: dict[str, str], oom_fd: int) -> subprocess.Popen:
    """Start the probe as the OOM killer's pick, not the supervisor: it inherits oom_score_adj 1000
    from the fork on, and we take ours back (allowed down to our start value) before it can run long.

    No preexec_fn, so Popen may vfork: a fork of this process, then Python code in the child, cost
    ~3 ms per trial and slowed the probe's own start-up."""
    own = os.pread(oom_fd, 16, 0).strip()
    set_oom_score(oom_fd, b"1000")
    try:
        return subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=work,
            env=env,
            close_fds=True,
            start_new_session=True,
        )
    finally:
        set_oom_score(oom_fd, own)


@contextlib.contextmanager
def layout(randomised: bool) -> Iterator[None]:
    """Run the block with address-space layout randomisation off when not `randomised`: what it execs
    inherits our personality, so a probe (or a warm parent) started here gets the same addresses every
    time. Our own layout is fixed already; we take our personality back after."""
    if randomised:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.personality.argtypes = [ctypes.c_ulong]
    own = libc.personality(PER_QUERY)
    # The container's seccomp profile allows exactly ADDR_NO_RANDOMIZE on its own (workcopy.PERSONALITY_RULE).
    if own == -1 or libc.personality(own | ADDR_NO_RANDOMIZE) == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"personality(ADDR_NO_RANDOMIZE): {os.strerror(err)}")
    try:
        yield
    finally:
        libc.personality(own)


def pump(proc: subprocess.Popen, out: Stream, err: Stream, deadline_s: float, started: float) -> tuple[bool, tuple]:
    """Drain both pipes until the probe exits or its deadline passes; returns (timed_out, wait4 result).

    One thread and poll(): a fork bomb may exhaust the pids limit, so nothing here may need a thread."""
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in streams:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, 1031, PIPE_SIZE)  # F_SETPIPE_SZ
    pidfd = os.pidfd_open(proc.pid)
    try:
        timed_out = not feed_until(streams, pidfd, started + deadline_s)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        status = os.wait4(proc.pid, 0)
    finally:
        os.close(pidfd)
    return timed_out, status


def feed_until(streams: dict[int, Stream], stop: int, until: float) -> bool:
    """Feed what each pipe in `streams` carries into its Stream until `stop` (a pidfd, a socket) is readable:
    True then; False once the monotonic clock passes `until`."""
    poller = select.poll()
    for fd in (*streams, stop):
        poller.register(fd, select.POLLIN)
    while (left := until - time.monotonic()) > 0:
        ready = poller.poll(left * 1000)
        if any(fd == stop for fd, _ in ready):
            return True
        for fd, _ in ready:
            chunk = os.read(fd, CHUNK)
            if chunk:
                streams[fd].feed(chunk)
            else:
                poller.unregister(fd)
    return False


def drain(fd: int, stream: Stream) -> None:
    """Read what is left in a pipe once every writer is dead (so EOF comes promptly)."""
    while chunk := os.read(fd, CHUNK):
        stream.feed(chunk)
