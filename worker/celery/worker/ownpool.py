"""The standing pool a gate-worker keeps itself (`gate-worker serve --pool own`): worker/host/pool.py's
PoolServer in a child process of its own, on a private socket, so a run's first batch on this machine
takes a started container instead of paying a container start.

A child process, not threads of the worker's main process: Celery forks its pool processes from that
process, and a fork taken while a pool thread holds a lock (an import, the Docker client's) can
deadlock the child. The child stops with the worker (SIGTERM, then it removes every container it
keeps), and the kernel sends it SIGTERM if the worker dies without stopping it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gate.core.suite.trial import Limits, WorkCopy
from gate.io import interrupts

PR_SET_PDEATHSIG = 1
STOP_WAIT_S = 15.0  # the pool's own stop takes seconds (worker/host/pool.py STOP_GRACE_S, JOIN_S)


class OwnPool:
    """A pool child process serving `size` containers of `image_id` on a socket in a private dir."""

    def __init__(self, size: int, image_id: str, work_copy: WorkCopy, *, tree_mount: bool = True) -> None:
        self._dir = tempfile.mkdtemp(prefix="probegate-worker-pool-")  # 0700, ours
        self.path = Path(self._dir) / "pool.sock"
        argv = [sys.executable, "-m", __name__, str(self.path), str(size), image_id, work_copy.value, str(os.getpid())]
        argv.append("mount" if tree_mount else "link")  # PROBEGATE_TREE_MOUNT, as the worker read it
        # Its own process group: a Ctrl-C at the worker's terminal reaches the worker, which stops it in order.
        self.proc = subprocess.Popen(argv, preexec_fn=_die_with_parent, process_group=0)

    def wait_listening(self, timeout_s: float = 10.0) -> bool:
        """Whether the pool's socket appeared in time (it then takes requests; it fills in the background)."""
        give_up = time.monotonic() + timeout_s
        while time.monotonic() < give_up and self.proc.poll() is None:
            if self.path.exists():
                return True
            time.sleep(0.05)
        return self.path.exists()

    def stop(self) -> None:
        """SIGTERM: the pool removes every container it keeps or handed out, then exits."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # its containers are left to the dead-process sweep
                self.proc.wait()
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)
            os.rmdir(self._dir)


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: the kernel sends SIGTERM when the worker dies.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def main(argv: list[str]) -> int:
    """The child: serve until SIGTERM or SIGINT, then remove everything (as `gate pool serve` does)."""
    from worker.host.pool import PoolServer

    path, size, image_id, mode, parent = Path(argv[0]), int(argv[1]), argv[2], WorkCopy(argv[3]), int(argv[4])
    tree_mount = argv[5:6] != ["link"]
    if os.getppid() != parent:
        return 0  # the worker died before the death signal was set: nobody would ever stop us
    server = PoolServer(path, size=size, tree_mount=tree_mount)
    try:
        with interrupts.routed():
            server.start()
            server.want(image_id, Limits(), mode)
            print(f"gate-worker: pool {server.label} keeps {size} container(s) on {path}", file=sys.stderr, flush=True)
            while True:
                signal.pause()
    except interrupts.Interrupted:
        pass  # the way it is meant to end
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
