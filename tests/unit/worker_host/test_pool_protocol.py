"""The standing pool's small protocol, without Docker: where a sandbox looks for the pool, which
sockets it refuses, which requests the pool refuses, and how a run's containers are ended by name."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from gate.core.suite.trial import Limits, WorkCopy
from gate.io.hostsettings import HostSettings
from worker.host.pool import PoolServer, Ready
from worker.host.poolclient import TAKE_TIMEOUT_S, Lease, default_socket, end_run, pool_socket
from worker.host.poolwire import MAX_LINE, PoolShape, read_line, read_take, take_ask


def test_pool_socket_is_the_option_then_the_env_then_an_existing_default(tmp_path, monkeypatch):
    """An explicit option wins, then PROBEGATE_POOL; "off" means none; the default only when it exists."""
    bare = HostSettings.from_env({"XDG_RUNTIME_DIR": str(tmp_path)})
    assert pool_socket(None, bare) is None
    default_socket(bare.runtime_dir).touch()
    assert pool_socket(None, bare) == tmp_path / "probegate-pool.sock"
    named = HostSettings.from_env({"XDG_RUNTIME_DIR": str(tmp_path), "PROBEGATE_POOL": "/elsewhere/pool.sock"})
    assert pool_socket(None, named) == Path("/elsewhere/pool.sock")
    assert pool_socket("off", named) is None
    assert pool_socket(None, HostSettings.from_env({"PROBEGATE_POOL": "off"})) is None
    assert pool_socket(tmp_path / "mine.sock", named) == tmp_path / "mine.sock"


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a file away")
def test_a_socket_of_another_user_is_never_connected_to(tmp_path):
    """A pool socket owned by another uid could hand us containers of its making: refused before connecting."""
    path = tmp_path / "pool.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    os.chown(path, 12345, 12345)
    try:
        with pytest.raises(OSError, match="belongs to uid 12345"):
            Lease(path)
    finally:
        server.close()


def _ask(payload: bytes):
    """What the pool's side reads from `payload`, sent by a thread that then closes its end (a payload may
    be larger than the socket's buffer, and one cut short must end in EOF, not a wait)."""
    ours, theirs = socket.socketpair()

    def send() -> None:
        with contextlib.suppress(OSError):  # the reader may stop and close first
            theirs.sendall(payload)
        theirs.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    with ours, theirs:
        try:
            return read_take(read_line(ours))
        finally:
            ours.shutdown(socket.SHUT_RD)
            sender.join(timeout=10)


def test_a_well_formed_request_names_a_shape_a_count_and_a_run():
    """The request's image, limits and work copy mode become the shape of the containers handed out."""
    ask = {"take": 2, "image_id": "sha256:" + "a" * 64, "limits": Limits().model_dump(mode="json"), "work_copy": "copy"}
    assert _ask((json.dumps(ask) + "\n").encode()) == (PoolShape("sha256:" + "a" * 64, Limits(), WorkCopy.COPY), 2, "")
    named = _ask((json.dumps({**ask, "run": "r-1"}) + "\n").encode())
    assert named[2] == "r-1"


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"take": 65}, ValueError),
        ({"take": -1}, ValueError),
        ({"limits": {"pids": 1}}, ValidationError),
        ({"work_copy": "unconfined"}, ValueError),
        ({"run": ["r"]}, ValueError),
        ({"run": "r" * 201}, ValueError),
    ],
)
def test_a_request_out_of_bounds_is_refused(change, error):
    """Too many containers, limits the suite schema refuses, an unknown work copy mode, or a run named by anything
    but a short string: refused."""
    ask = {"take": 1, "image_id": "x", "limits": Limits().model_dump(mode="json"), "work_copy": "overlay", **change}
    with pytest.raises(error):
        _ask((json.dumps(ask) + "\n").encode())


def test_the_lease_asks_what_the_pool_reads():
    """A take built by the run's side reads back on the pool's side as the same shape, count and run."""
    shape = PoolShape("sha256:" + "b" * 64, Limits(), WorkCopy.OVERLAY)
    assert _ask((json.dumps(take_ask(3, shape, "r-2")) + "\n").encode()) == (shape, 3, "r-2")


@pytest.mark.parametrize("payload", [b"[1, 2]\n", b"x" * (MAX_LINE + 10), b'{"take": 1'])
def test_a_line_that_is_no_object_too_long_or_cut_short_is_refused(payload):
    """A line that is not a JSON object, one longer than the limit, or a connection closed mid-line: refused."""
    with pytest.raises((ValueError, ConnectionError)):
        _ask(payload)


def test_a_lease_knows_at_once_whether_its_pool_holds_its_end(tmp_path):
    """A silent live pool reads as alive without waiting out the take timeout; a closed one reads as gone."""
    path = tmp_path / "pool.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    with server:
        lease = Lease(path)
        conn, _ = server.accept()
        started = time.monotonic()
        assert lease.alive()
        assert time.monotonic() - started < TAKE_TIMEOUT_S / 4
        conn.close()
        assert not lease.alive()
        lease.close()


class _Stream:
    ended = False

    def close(self) -> None:
        pass


class _FakeWarm:
    """What the pool hands out, without a container: records its removal."""

    def __init__(self, root: Path) -> None:
        self.stream = _Stream()
        self.container = type("C", (), {"id": f"c-{root.name}"})()
        self.src_dir = root / "src"
        self.removed = threading.Event()

    def remove(self) -> None:
        self.removed.set()


def test_end_run_removes_what_a_run_took_and_no_other_runs(tmp_path):
    """A process holding no lease ends a run by name: the pool removes that run's containers at once (its
    lease still open) and leaves another run's alone; the ended lease no longer holds refilling back."""
    shape = PoolShape("x", Limits(), WorkCopy.COPY)
    server = PoolServer(tmp_path / "pool.sock", size=0, client=object())
    server.start()
    try:
        warms = [_FakeWarm(tmp_path / name) for name in ("a", "b")]
        server._shapes.append(shape)
        server._ready[shape] = [Ready(w) for w in warms]  # type: ignore[misc]
        mine, theirs = Lease(server.path), Lease(server.path)
        assert len(mine.take(1, "x", Limits(), WorkCopy.COPY, run_id="run-1")) == 1
        assert len(theirs.take(1, "x", Limits(), WorkCopy.COPY, run_id="run-2")) == 1
        assert end_run(server.path, "run-1") == 1
        assert warms[0].removed.is_set() and not warms[1].removed.is_set()
        assert len(server._lease_started) == 1  # run-2's lease alone still defers refilling
        assert end_run(server.path, "nobody") == 0
        mine.close()
        theirs.close()
        assert warms[1].removed.wait(5), "a closed lease gives its containers back for removal"
    finally:
        server.stop()
