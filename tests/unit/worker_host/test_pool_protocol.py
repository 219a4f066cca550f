"""The standing pool's small protocol, without Docker: where a sandbox looks for the pool, which
sockets it refuses, and which requests the pool refuses."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from gate.core.suite.trial import Limits, WorkCopy
from worker.host.pool import PoolShape, _request
from worker.host.poolclient import ENV, TAKE_TIMEOUT_S, Lease, default_socket, pool_socket


def test_pool_socket_is_the_option_then_the_env_then_an_existing_default(tmp_path, monkeypatch):
    """An explicit option wins, then PROBEGATE_POOL; "off" means none; the default only when it exists."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv(ENV, raising=False)
    assert pool_socket() is None
    default_socket().touch()
    assert pool_socket() == tmp_path / "probegate-pool.sock"
    monkeypatch.setenv(ENV, "/elsewhere/pool.sock")
    assert pool_socket() == Path("/elsewhere/pool.sock")
    assert pool_socket("off") is None
    monkeypatch.setenv(ENV, "off")
    assert pool_socket() is None
    assert pool_socket(tmp_path / "mine.sock") == tmp_path / "mine.sock"


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
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(payload)
        return _request(ours)


def test_a_well_formed_request_names_a_shape_and_a_count():
    """The request's image, limits and work copy mode become the shape of the containers handed out."""
    ask = {"take": 2, "image_id": "sha256:" + "a" * 64, "limits": Limits().model_dump(mode="json"), "work_copy": "copy"}
    shape, count = _ask((json.dumps(ask) + "\n").encode())
    assert (shape, count) == (PoolShape("sha256:" + "a" * 64, Limits(), WorkCopy.COPY), 2)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"take": 65}, ValueError),
        ({"take": -1}, ValueError),
        ({"limits": {"pids": 1}}, ValidationError),
        ({"work_copy": "unconfined"}, ValueError),
    ],
)
def test_a_request_out_of_bounds_is_refused(change, error):
    """Too many containers, limits the suite schema refuses, or an unknown work copy mode: refused."""
    ask = {"take": 1, "image_id": "x", "limits": Limits().model_dump(mode="json"), "work_copy": "overlay", **change}
    with pytest.raises(error):
        _ask((json.dumps(ask) + "\n").encode())


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
