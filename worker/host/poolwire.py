"""What the standing pool (worker/host/pool.py) and a run's lease (worker/host/poolclient.py) say to each
other over its unix socket: one JSON object per line each way. A connection asks once, either a take (up to
N started containers of one shape, for a named run) or an end_run (remove a run's containers); the pool
answers with the slots, the count ended, or an error. Both sides build and read the asks here, so the
field names live in one place; the server reads what any local process of its uid may send, so every
field is checked before it is used."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

from gate.core.suite.trial import Limits, WorkCopy

MAX_LINE = 65536  # no ask or answer comes near this; a longer line is refused, not buffered
MAX_TAKE = 64
MAX_RUN_NAME = 200


@dataclass(frozen=True)
class PoolShape:
    """What a container of the standing pool is fixed to at creation: a run takes only its own shape."""

    image_id: str
    limits: Limits
    work_copy: WorkCopy


def send_line(conn: socket.socket, message: dict[str, Any]) -> None:
    """Send one JSON object as one line."""
    conn.sendall((json.dumps(message) + "\n").encode())


def read_line(conn: socket.socket) -> dict[str, Any]:
    """Read one line and parse it as a JSON object; a closed connection is a ConnectionError, a line
    that is too long or not an object a ValueError."""
    line = b""
    while not line.endswith(b"\n"):
        if len(line) >= MAX_LINE:
            raise ValueError(f"a line longer than {MAX_LINE} bytes")
        chunk = conn.recv(MAX_LINE)
        if not chunk:
            raise ConnectionError("the connection closed before a whole line")
        line += chunk
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a line is a JSON object")
    return message


def take_ask(count: int, shape: PoolShape, run_id: str = "") -> dict[str, Any]:
    """The ask for up to `count` containers of `shape`, for `run_id`."""
    return {
        "take": count,
        "image_id": shape.image_id,
        "limits": shape.limits.model_dump(mode="json"),
        "work_copy": shape.work_copy.value,
        "run": run_id,
    }


def end_run_ask(run_id: str) -> dict[str, Any]:
    """The ask that has the pool remove every container it handed out for `run_id`."""
    return {"end_run": run_id}


def read_take(ask: dict[str, Any]) -> tuple[PoolShape, int, str]:
    """A take's shape, count and run (empty when it names none), checked."""
    count = int(ask["take"])
    if not 0 <= count <= MAX_TAKE:
        raise ValueError(f"take {count}: must be 0..{MAX_TAKE}")
    shape = PoolShape(str(ask["image_id"]), Limits.model_validate(ask["limits"]), WorkCopy(ask["work_copy"]))
    return shape, count, run_name(ask.get("run", ""))


def run_name(value: object) -> str:
    """A run's name as an ask gives it, checked."""
    if not isinstance(value, str) or len(value) > MAX_RUN_NAME:
        raise ValueError(f"a run is named by a string of at most {MAX_RUN_NAME} characters")
    return value
