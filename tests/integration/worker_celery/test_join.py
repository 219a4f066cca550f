"""Servers that join with one command, through a real redis-server, a real `gate workers admit` process and real
`gate-worker join` processes: a joined server serves a run with exactly an enrolled worker's broker rights and
is revoked the same way; a used, expired or revoked token, a replayed request and a request without the token's
proof are refused; the token's broker user can push a join request and take a reply, and nothing else."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support.servers import GATE, WORKER, RedisServer
from test_enrol import run_trials

from gate.core.trust.invites import parse_token, request_mac
from gate.io.keys import SigningKey, load_signing_key, public_path, write_new_key
from gate.io.sealing import OpeningKey
from worker.celery.shared.app import direct_queue, make_app
from worker.celery.shared.joinkeys import reply_key, request_list
from worker.celery.worker.join import join_request

pytestmark = pytest.mark.integration


class Coordinator:
    """The coordinator's side: a registry in `tmp`, the broker's admin URL, and `gate workers admit` running."""

    def __init__(self, broker: RedisServer, tmp: Path) -> None:
        self.url, self.tmp = broker.url, tmp
        self.registry = tmp / "coordinator" / "workers.json"
        self.env = {**os.environ, "PROBEGATE_REDIS_ADMIN": broker.url, "PROBEGATE_WORKERS": str(self.registry)}
        self.admission: subprocess.Popen[bytes] | None = None

    def gate(self, *argv: str, ok: bool = True) -> list[dict]:
        done = subprocess.run([GATE, "workers", *argv], capture_output=True, text=True, env=self.env, timeout=60)
        assert (done.returncode == 0) == ok, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def invite(self, *argv: str) -> tuple[str, str]:
        """(invite id, token) of a new invite."""
        (row,) = self.gate("invite", *argv)
        return row["invite"], row["token"]

    def admit(self) -> None:
        log = (self.tmp / "admission.log").open("wb")
        argv = [GATE, "workers", "admit"]
        self.admission = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)

    def stop(self) -> None:
        if self.admission is not None and self.admission.poll() is None:
            self.admission.send_signal(signal.SIGTERM)
            self.admission.wait(timeout=15)


@pytest.fixture
def coordinator(redis_server: RedisServer, tmp_path: Path) -> Iterator[Coordinator]:
    found = Coordinator(redis_server, tmp_path)
    found.admit()
    yield found
    found.stop()


def join(tmp: Path, name: str, token: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`gate-worker join TOKEN --no-serve` as server `name` (its own key and broker file under `tmp`)."""
    argv = [*WORKER, "join", token, "--no-serve", "--wait", "30", *server_files(tmp, name), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def server_files(tmp: Path, name: str) -> list[str]:
    return ["--key", str(tmp / f"{name}.key"), "--broker-file", str(tmp / f"{name}.broker.json")]


def test_a_server_joins_with_one_command_serves_a_run_and_is_revoked_like_an_enrolled_one(
    coordinator: Coordinator, redis_server: RedisServer, tmp_path: Path, docker_client, sandbox_image: str
) -> None:
    """`gate-worker join TOKEN` enrols the server as spot-<key id>, under a broker user with exactly the rules of
    one made by `gate workers enrol --redis-admin-url` (its own queue and results only), serves a run whose every
    trial it signs, and `gate workers revoke` removes it the same way (its connections closed, its user gone)."""
    _, token = coordinator.invite("--prefix", "spot")
    log = (tmp_path / "joined.log").open("wb")
    server = subprocess.Popen(
        [*WORKER, "join", token, *server_files(tmp_path, "s1"), "--concurrency", "1", "--cache", str(tmp_path / "c")],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        broker_file = tmp_path / "s1.broker.json"
        name = wait_for(lambda: json.loads(broker_file.read_text())["name"] if broker_file.exists() else None, 60)
        key = load_signing_key(tmp_path / "s1.key")
        assert name == f"spot-{key.key_id[:8]}" and broker_file.stat().st_mode & 0o077 == 0
        wait_for(lambda: ping(redis_server.url, f"{name}@{socket.gethostname()}", server, tmp_path), 90)
        observations, _ = run_trials(redis_server, tmp_path, coordinator.registry, n=6)
        assert {o.worker_id for o in observations} == {name} and all(o.fault is None for o in observations)
        # `gate workers status`: up, seen within its heartbeat's expiry, the six trials it took, no invite left.
        *rows, invites = coordinator.gate("status", "--json")
        (row,) = rows
        assert (row["name"], row["state"], row["tier"]) == (name, "up", "stranger"), row
        wait_for(lambda: coordinator.gate("status", "--json")[0]["trials_last_minute"] == 6 or None, 10)
        assert invites == {"invites": {"open": 0, "uses_left": 0}}
        hand = tmp_path / "hand.key"
        write_new_key(hand)
        coordinator.gate("enrol", str(public_path(hand)), "--name", "by-hand")
        admin = redis.Redis.from_url(redis_server.url)
        assert rules(admin, f"probegate-worker-{name}", key) == rules(
            admin, "probegate-worker-by-hand", load_signing_key(hand)
        )
        (row,) = coordinator.gate("revoke", name)
        assert row["state"] == "revoked" and row["connections_closed"] >= 1, row
        states = {r["name"]: r["state"] for r in coordinator.gate("status", "--json")[:-1]}
        assert states == {name: "revoked", "by-hand": "gone"}, states  # by-hand never served: gone
        assert admin.acl_getuser(f"probegate-worker-{name}") is None
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)


def rules(admin: redis.Redis, user: str, key: SigningKey) -> list[str]:
    """A broker user's ACL rules with its own queue's name made generic and its password dropped."""
    described = admin.execute_command("ACL", "GETUSER", user)
    text = json.dumps([v.decode() if isinstance(v, bytes) else v for v in described], default=str)
    text = text.replace(direct_queue(key.key_id), "Q")
    fields = json.loads(text)
    return [value for label, value in zip(fields[::2], fields[1::2], strict=True) if label != "passwords"]


def ping(url: str, name: str, server: subprocess.Popen[bytes], tmp: Path) -> bool | None:
    if server.poll() is not None:
        raise AssertionError(f"the joined server exited: {(tmp / 'joined.log').read_text()[-2000:]}")
    return bool(make_app(url).control.ping(timeout=0.5, destination=[name])) or None


def wait_for(probe, timeout: float):
    """The first truthy value `probe()` returns, asked every 0.2 s for at most `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if (value := probe()) is not None:
            return value
        time.sleep(0.2)
    raise AssertionError(f"nothing within {timeout}s")


def test_used_expired_and_revoked_tokens_are_refused(coordinator: Coordinator, tmp_path: Path) -> None:
    """A one-use token admits one server and refuses the next; a token past its expiry and a revoked one join
    nobody; each refusal is one line and exit 65, and the registry holds only the one admitted server."""
    _, once = coordinator.invite("--uses", "1")
    first = join(tmp_path, "a", once)
    assert first.returncode == 0, first.stderr
    second = join(tmp_path, "b", once)
    assert second.returncode == 65 and "invite_used" in second.stderr, second.stderr
    expiring, short = coordinator.invite("--expires", "1s")
    wait_for(lambda: any(r["state"] == "expired" for r in coordinator.gate("invites") if r["invite"] == expiring)
             or None, 10)  # fmt: skip
    late = join(tmp_path, "c", short)
    assert late.returncode == 65 and ("invite_expired" in late.stderr or "refused this token" in late.stderr)
    revoked, gone = coordinator.invite("--uses", "5")
    coordinator.gate("uninvite", revoked)
    refused = join(tmp_path, "d", gone)
    assert refused.returncode == 65 and "refused this token" in refused.stderr, refused.stderr
    for result in (second, late, refused):
        assert result.stderr.count("\n") <= 2 and "Traceback" not in result.stderr
    names = [row["name"] for row in coordinator.gate("list")]
    assert len(names) == 1 and names[0].startswith("joined-"), names


def test_a_replayed_request_and_one_without_the_tokens_proof_are_refused(
    coordinator: Coordinator, tmp_path: Path
) -> None:
    """Adversarial: a join request admitted once and pushed again (a copy taken off the wire), and a request whose
    MAC is not the token's (a server that holds the broker password of another invite, say), are refused with
    why; neither enrols anything."""
    invite_id, token = coordinator.invite("--uses", "5")
    key = SigningKey.generate()
    url, signed = join_request(token, key, OpeningKey.generate(), "box")
    client = redis.Redis.from_url(url)
    raw = signed.model_dump_json()
    client.rpush(request_list(invite_id), raw)
    assert "granted" in wait_reply(client, signed.request.digest())
    client.rpush(request_list(invite_id), raw)
    assert wait_reply(client, signed.request.digest())["refused"] == "replayed_request"
    other = SigningKey.generate()
    _, forged = join_request(token, other, OpeningKey.generate(), "box")
    forged = forged.model_copy(update={"mac": request_mac("00" * 32, forged.request)})
    client.rpush(request_list(invite_id), forged.model_dump_json())
    assert wait_reply(client, forged.request.digest())["refused"] == "bad_token_proof"
    assert [row["key_id"] for row in coordinator.gate("list")] == [key.key_id]


def wait_reply(client: redis.Redis, digest: str) -> dict:
    return wait_for(lambda: json.loads(raw) if (raw := client.getdel(reply_key(digest))) else None, 30)


def test_a_token_user_can_push_a_join_request_and_take_a_reply_and_nothing_else(
    coordinator: Coordinator, redis_server: RedisServer
) -> None:
    """Adversarial: with the token's broker URL, pushing onto its own invite's list and taking a reply work;
    reading or emptying that list, another invite's list, the trial queues, blobs, books, results, replies
    written by it, pub/sub, and every admin command are refused by the broker."""
    invite_id, token = coordinator.invite()
    other_id, _ = coordinator.invite()
    _, url = parse_token(token)
    client = redis.Redis.from_url(url)
    assert client.rpush(request_list(invite_id), "x") == 1
    assert client.getdel(reply_key("a" * 64)) is None
    denied = [
        ("LRANGE", request_list(invite_id), 0, -1),
        ("LPOP", request_list(invite_id)),
        ("DEL", request_list(invite_id)),
        ("RPUSH", request_list(other_id), "x"),
        ("RPUSH", reply_key("a" * 64), "x"),
        ("SET", reply_key("a" * 64), "x"),
        ("GET", reply_key("a" * 64)),
        ("LPUSH", "probegate.trials", "x"),
        ("BRPOP", "probegate.trials", 1),
        ("GET", "probegate:blob:x"),
        ("SET", "probegate:books:x", "x"),
        ("GET", "celery-task-meta-x"),
        ("KEYS", "*"),
        ("SCAN", 0),
        ("PUBLISH", "/0.celery.pidbox", "x"),
        ("CONFIG", "GET", "*"),
        ("ACL", "LIST"),
        ("CLIENT", "LIST"),
        ("FLUSHALL",),
        ("EVAL", "return 1", 0),
    ]
    for command in denied:
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.execute_command(*command)
    pubsub = client.pubsub()
    pubsub.subscribe("/0.celery.pidbox")  # the refusal is the reply pub/sub reads next
    with pytest.raises(redis.exceptions.NoPermissionError):
        pubsub.get_message(timeout=5)
    admin = redis.Redis.from_url(redis_server.url)
    assert admin.lrange(request_list(invite_id), 0, -1) in ([b"x"], [])  # the admission may have taken it
