"""The run's side of the standing pool (worker/host/pool.py): take already-started containers,
not bound to any tree, over a unix socket, and hold the connection for as long as the run uses them.

The connection is the lease: when it closes (the run closed, or its process died and the kernel
closed it) the pool removes every container it handed over on it. A container is never given to
two runs, and never given back. Any failure to reach the pool leaves the run to start its own.
`end_run` has the pool remove a run's containers from a process that holds none of its leases.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
from dataclasses import dataclass
from pathlib import Path

from gate.core.suite.trial import Limits, WorkCopy
from gate.io.hostsettings import HostSettings
from worker.host.poolwire import PoolShape, end_run_ask, read_line, send_line, take_ask

TAKE_TIMEOUT_S = 2.0  # a pool slower than this to answer is not worth waiting for


def default_socket(runtime_dir: Path | None = None) -> Path:
    """Where `gate pool serve` listens unless told otherwise: in the user's runtime dir ($XDG_RUNTIME_DIR)."""
    return (runtime_dir or Path(f"/tmp/probegate-{os.getuid()}")) / "probegate-pool.sock"


def pool_socket(option: str | Path | None = None, host: HostSettings | None = None) -> Path | None:
    """The socket a sandbox takes containers from: `option`, else the host's setting (PROBEGATE_POOL),
    else the default one if it exists; None for "off" or when there is none."""
    host = host or HostSettings()
    word = str(option) if option is not None else host.pool
    if word == "off":
        return None
    if word:
        return Path(word)
    found = default_socket(host.runtime_dir)
    return found if found.exists() else None


@dataclass(frozen=True)
class Slot:
    """One started container the pool handed over: its ID and the host dir holding its mounts."""

    container_id: str
    root: Path


def _connect(path: Path) -> socket.socket:
    st = os.stat(path)
    if st.st_uid != os.getuid():
        # Another user's socket could hand us containers of its making: never.
        raise OSError(f"pool socket {path} belongs to uid {st.st_uid}, not to us")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TAKE_TIMEOUT_S)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    return sock


def _ask(sock: socket.socket, ask: dict) -> dict:
    """Send one ask and read the pool's one answer (an error answer, or a line that does not parse, is an
    OSError)."""
    send_line(sock, ask)
    try:
        answer = read_line(sock)
    except ValueError as exc:
        raise OSError(f"the pool answered something else than a JSON line: {exc}") from None
    if "error" in answer:
        raise OSError(f"the pool refused: {answer['error']}")
    return answer


def end_run(path: Path, run_id: str) -> int:
    """Have the pool at `path` remove every container it handed out for `run_id`; how many."""
    with _connect(path) as sock:
        return int(_ask(sock, end_run_ask(run_id))["ended"])


class Lease:
    """One run's connection to the pool; the containers taken on it are the run's until `close`."""

    def __init__(self, path: Path) -> None:
        self._sock = _connect(path)

    def take(self, count: int, image_id: str, limits: Limits, work_copy: WorkCopy, run_id: str = "") -> list[Slot]:
        """Up to `count` started containers of this image, limits and work copy mode (perhaps none),
        for `run_id` (named so that `end_run` can reach them)."""
        ask = take_ask(count, PoolShape(image_id, limits, work_copy), run_id)
        answer = _ask(self._sock, ask)
        return [Slot(str(s["container"]), Path(s["root"])) for s in answer["slots"]][:count]

    def alive(self) -> bool:
        """Whether the pool still holds its end (a dead pool cannot remove what it handed over)."""
        # select, not MSG_DONTWAIT: on a socket with a timeout Python polls before recv whatever the
        # flags, so a silent (live) pool would cost TAKE_TIMEOUT_S and read as dead.
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
            return not readable or self._sock.recv(1, socket.MSG_PEEK) != b""
        except OSError:
            return False

    def close(self) -> None:
        """Hand every container taken on this lease back for removal (the pool removes them)."""
        with contextlib.suppress(OSError):
            self._sock.close()
