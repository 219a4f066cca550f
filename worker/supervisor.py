"""In-container supervisor: runs one probe, watches it, prints exactly one JSON report line.

Standalone and stdlib-only: it is bind-mounted read-only into the sandbox image (Python 3.13) and
runs as PID 1 with `python3 /opt/probegate/supervisor.py /opt/probegate/trial.json`.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

PR_SET_DUMPABLE = 4
CHUNK = 1 << 16
READER_JOIN_S = 5.0


class Stream:
    """One output pipe: the first `cap` bytes kept, the full length and sha256 counted."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.length = 0
        self.digest = hashlib.sha256()

    def pump(self, fd: int) -> None:
        # Drain to EOF whatever the cap: a blocked writer would otherwise stall the probe.
        while chunk := os.read(fd, CHUNK):
            self.length += len(chunk)
            self.digest.update(chunk)
            room = self.cap - len(self.head)
            if room > 0:
                self.head += chunk[:room]

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


def copy_tree(src: str, dst: str) -> None:
    """Copy the entries of `src` into the existing directory `dst` (a tmpfs we may not chmod)."""
    for entry in os.scandir(src):
        target = os.path.join(dst, entry.name)
        if entry.is_dir(follow_symlinks=False):
            shutil.copytree(entry.path, target, symlinks=True)
        else:
            shutil.copy2(entry.path, target, follow_symlinks=False)


def signature(path: str) -> str:
    """What a path holds, permission bits included (a chmod is a write too): sha256, link target or type."""
    st = os.lstat(path)
    mode = f"{stat.S_IMODE(st.st_mode):o}"
    if stat.S_ISDIR(st.st_mode):
        return f"dir:{mode}"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        # Fifos, sockets, mqueues: never opened, since opening a fifo blocks.
        return f"special:{st.st_mode:o}:{st.st_size}:{st.st_mtime_ns}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return f"unreadable:{mode}:{st.st_size}:{st.st_mtime_ns}"
    digest = hashlib.sha256()
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)
    return f"{digest.hexdigest()}:{mode}"


def snapshot(roots: list[str]) -> dict[str, str]:
    """Every entry under the writable roots (not the roots themselves), path → signature."""
    seen: dict[str, str] = {}
    for root in roots:
        if not os.path.isdir(root):
            continue
        for top, dirs, files in os.walk(root, onerror=lambda _err: None):
            for name in dirs + files:
                path = os.path.join(top, name)
                try:
                    seen[path] = signature(path)
                except OSError:
                    seen[path] = "vanished"
    return seen


def diff(before: dict[str, str], after: dict[str, str]) -> list[dict]:
    """created / modified / deleted paths between two snapshots, sorted by path."""
    changes = []
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            change = "created"
        elif path not in after:
            change = "deleted"
        elif before[path] != after[path]:
            change = "modified"
        else:
            continue
        # Report undecodable names readably instead of leaking lone surrogates into JSON.
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        changes.append({"path": shown, "change": change})
    return changes


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


def raise_oom_score() -> None:
    # Runs in the child before exec: make the probe, not the supervisor, the OOM killer's pick.
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def run_trial(trial: dict) -> dict:
    """Copy the tree, run the probe once under its deadline, and describe what happened."""
    copy_tree(trial.get("src", "/src"), trial.get("work", "/work"))
    roots = list(trial["writable_roots"])
    before = snapshot(roots)
    out, err = Stream(trial["output_cap_bytes"]), Stream(trial["output_cap_bytes"])
    deadline_s = float(trial["deadline_s"])
    with open(trial["stdin"], "rb") as stdin:
        started = time.monotonic()
        proc = subprocess.Popen(
            trial["argv"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=trial.get("work", "/work"),
            env=trial["env"],
            close_fds=True,
            start_new_session=True,
            preexec_fn=raise_oom_score,
        )
    readers = [
        threading.Thread(target=out.pump, args=(proc.stdout.fileno(),), daemon=True),
        threading.Thread(target=err.pump, args=(proc.stderr.fileno(),), daemon=True),
    ]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    duration = time.monotonic() - started
    # Orphans (other sessions included) could keep the pipes open or keep writing files.
    kill_everything()
    for reader in readers:
        reader.join(READER_JOIN_S)
    after = snapshot(roots)
    code = proc.returncode
    return {
        "exit_code": code if code >= 0 else None,
        "signal": -code if code < 0 else None,
        "timed_out": timed_out,
        "duration_s": round(duration, 6),
        "stdout": out.report(),
        "stderr": err.report(),
        "writes": diff(before, after),
    }


def emit(report: dict) -> None:
    """Write the single report line to our own stdout, which only the host reads."""
    line = (json.dumps(report, separators=(",", ":")) + "\n").encode("ascii")
    view = memoryview(line)
    while view:
        view = view[os.write(1, view) :]


def main(argv: list[str]) -> int:
    try:
        harden()
        with open(argv[1], "rb") as handle:
            trial = json.load(handle)
        report = run_trial(trial)
    except Exception as exc:
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 2
    emit(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
