"""In-container supervisor: runs batches of probes, each fresh, and prints one JSON line per trial.

Standalone and stdlib-only: it is bind-mounted read-only into the sandbox image (Python 3.13) and
runs as PID 1 with `python3 /opt/probegate/supervisor.py /opt/probegate/in [idle_s]`. It serves one
batch file at a time (`batch-0.json`, `batch-1.json`, ... written by the host into the mounted input
dir), reports each trial, then `{"done": n}`, and waits for the next; it exits on a `stop` file or
after idle_s without a batch, so a warm container outlives no vanished host for long. Between
trials it kills every other process and wipes the writable places, so no trial sees another's
processes or writes. The host reads the lines as they come and enforces deadlines itself too.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import time

try:
    from fsdiff import copy_tree, diff, snapshot, wipe  # inside the sandbox: a sibling in the same read-only mount
except ImportError:  # imported on the host as worker.supervisor
    from worker.fsdiff import copy_tree, diff, snapshot, wipe

PR_SET_DUMPABLE = 4
CHUNK = 1 << 20
PIPE_SIZE = 1 << 20  # the unprivileged maximum: fewer wake-ups for a flooding probe
CANARY_DIR = "/tmp/.probegate"
CANARY_FILE = f"{CANARY_DIR}/credentials"
CANARY_ENV = "API_TOKEN"
CLOCK_SLACK_S = 5.0
OOM_SCORE_ADJ = "/proc/self/oom_score_adj"
IDLE_S = 60.0  # exit after this long without a batch (the host stops using a container well before)


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


def harden() -> None:
    """Make PID 1 undumpable so a same-uid probe cannot open /proc/1/fd/* or /proc/1/mem."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    # As PID 1, signals left at SIG_DFL are dropped when sent from inside the namespace, so the
    # probe cannot interrupt us; Python's own SIGINT handler would let it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)


def kill_everything() -> None:
    """SIGKILL and reap every process but ourselves; as PID 1 we are exempt from kill(-1)."""
    for _ in range(1000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        # kill(-1) also "succeeds" on zombies, so reap until no child is left before retrying.
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break


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


def check_clock(batch: dict) -> str | None:
    """Prove a child that clears LD_PRELOAD and FAKETIME* still reads the frozen instant; else say why."""
    expect = batch.get("frozen_epoch")
    if expect is None:
        return None
    env = {k: v for k, v in batch["trials"][0]["env"].items() if k != "LD_PRELOAD" and not k.startswith("FAKETIME")}
    argv = [sys.executable, "-S", "-c", "import time; print(time.time())"]
    child = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20)
    try:
        seen = float(child.stdout)
    except ValueError:
        return f"clock preflight child printed {child.stdout[:80]!r} (exit {child.returncode})"
    if abs(seen - float(expect)) > CLOCK_SLACK_S:
        return f"clock preflight: a child without LD_PRELOAD reads {seen:.0f}, not the frozen {float(expect):.0f}"
    return None


def plant_canary(canary: str) -> None:
    # Before the `before` snapshot, so the planted file is not the probe's write.
    os.mkdir(CANARY_DIR, 0o755)
    fd = os.open(CANARY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"[default]\napi_token = {canary}\n")


def pump(proc: subprocess.Popen, out: Stream, err: Stream, deadline_s: float, started: float) -> tuple[bool, tuple]:
    """Drain both pipes until the probe exits or its deadline passes; returns (timed_out, wait4 result).

    One thread and poll(): a fork bomb may exhaust the pids limit, so nothing here may need a thread."""
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in streams:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, 1031, PIPE_SIZE)  # F_SETPIPE_SZ
    pidfd = os.pidfd_open(proc.pid)
    poller = select.poll()
    for fd in (*streams, pidfd):
        poller.register(fd, select.POLLIN)
    timed_out = False
    try:
        while True:
            left = started + deadline_s - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready = poller.poll(left * 1000)
            if any(fd == pidfd for fd, _ in ready):
                break
            for fd, _ in ready:
                chunk = os.read(fd, CHUNK)
                if chunk:
                    streams[fd].feed(chunk)
                else:
                    poller.unregister(fd)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        status = os.wait4(proc.pid, 0)
    finally:
        os.close(pidfd)
    return timed_out, status


def drain(fd: int, stream: Stream) -> None:
    """Read what is left in a pipe once every writer is dead (so EOF comes promptly)."""
    while chunk := os.read(fd, CHUNK):
        stream.feed(chunk)


def run_trial(batch: dict, trial: dict) -> dict:
    """Copy the tree into the (empty) work dir, run the probe once under its deadline, describe it."""
    work, roots = batch.get("work", "/work"), list(batch["writable_roots"])
    copy_tree(batch.get("src", "/src"), work)
    canary = trial.get("canary", "")
    env = dict(trial["env"])
    if canary:
        plant_canary(canary)
        env[CANARY_ENV] = canary
    before = snapshot(roots)
    cap = int(trial["output_cap_bytes"])
    out, err = Stream(cap, canary.encode()), Stream(cap, canary.encode())
    ooms = oom_kills()
    with open(trial["stdin"], "rb") as stdin:
        started = time.monotonic()
        proc = spawn(trial["argv"], stdin, work, env, batch["oom_fd"])
    timed_out, (_, status, usage) = pump(proc, out, err, float(trial["deadline_s"]), started)
    duration = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never tries to reap it again
    # Orphans (other sessions included) could keep the pipes open or keep writing files.
    kill_everything()
    drain(proc.stdout.fileno(), out)
    drain(proc.stderr.fileno(), err)
    proc.stdout.close()
    proc.stderr.close()
    after = snapshot(roots)
    code = proc.returncode
    return {
        "exit_code": code if code >= 0 else None,
        "signal": -code if code < 0 else None,
        "timed_out": timed_out,
        "oom_killed": ooms >= 0 and oom_kills() > ooms,
        "duration_s": round(duration, 6),
        "rusage_user_s": round(usage.ru_utime, 6),
        "rusage_sys_s": round(usage.ru_stime, 6),
        "max_rss_kb": int(usage.ru_maxrss),
        "canary_seen": out.canary_seen or err.canary_seen,
        "stdout": out.report(),
        "stderr": err.report(),
        "writes": diff(before, after),
    }


def emit(report: dict) -> None:
    """Write one report line to our own stdout, which only the host reads."""
    line = (json.dumps(report, separators=(",", ":")) + "\n").encode("ascii")
    view = memoryview(line)
    while view:
        view = view[os.write(1, view) :]


def wait_batch(in_dir: str, seq: int, idle_s: float) -> str | None:
    """The path of batch `seq` once the host has written it; None on a stop file or when idle too long.

    Polled (stdlib only, no inotify): every millisecond at first, since the next batch usually
    follows at once, then more slowly so an idle container costs next to nothing."""
    path, stop = f"{in_dir}/batch-{seq}.json", f"{in_dir}/stop"
    since = time.monotonic()
    while True:
        if os.path.exists(path):
            return path
        idle = time.monotonic() - since
        if idle >= idle_s or os.path.exists(stop):
            return None
        time.sleep(0.001 if idle < 1.0 else 0.02)


def run_batch(batch: dict) -> int | None:
    """Run and report every trial of one batch; an exit code when the container must not go on."""
    for trial in batch["trials"]:
        try:
            report = run_trial(batch, trial)
        except Exception as exc:
            # The sandbox may be in an unknown state: stop, and let the host start a fresh container.
            emit({"id": trial["id"], "error": f"{type(exc).__name__}: {exc}"})
            return 2
        emit({"id": trial["id"], **report})
        try:
            # Reset after, not before: a failure here is this trial's doing, and its report is out.
            for root in batch["writable_roots"]:
                wipe(root)
        except OSError as exc:
            emit({"reset_error": f"{type(exc).__name__}: {exc}"})
            return 2
    return None


def main(argv: list[str]) -> int:
    try:
        oom_fd = open_oom_score()
        harden()
        in_dir = argv[1]
        idle_s = float(argv[2]) if len(argv) > 2 else IDLE_S
    except Exception as exc:
        emit({"batch_error": f"{type(exc).__name__}: {exc}"})
        return 2
    seq = 0
    while (path := wait_batch(in_dir, seq, idle_s)) is not None:
        try:
            with open(path, "rb") as handle:
                batch = json.load(handle)
            batch["oom_fd"] = oom_fd
            # The clock is the container's (the host keys warm containers by it): prove it once.
            reason = check_clock(batch) if seq == 0 else None
        except Exception as exc:
            emit({"batch_error": f"{type(exc).__name__}: {exc}"})
            return 2
        if reason is not None:
            emit({"batch_error": reason})
            return 2
        code = run_batch(batch)
        if code is not None:
            return code
        emit({"done": seq})
        seq += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
