"""A broker for servers on the open internet: password and TLS (`rediss://`) work end to end with
a real redis-server and a real worker, and a worker refuses anything but JSON."""

from __future__ import annotations

import hashlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support.servers import RedisServer, Workers

from gate.core.suite.trial import TrialSpec
from gate.core.testing import make_specs
from gate.io.snapshot import LocalInputs
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.app import TASK_RUN_BATCH, make_app, queue_for
from worker.host.engine import DEFAULT_IMAGE

pytestmark = pytest.mark.integration
PASSWORD = "s3cret-for-tests"


class TlsRedis(RedisServer):
    """redis-server with a TLS listener only, a password, and a throwaway CA."""

    name = "tls-redis-server"

    def argv(self) -> list[str]:
        d = self.workdir
        if not (d / "srv.crt").exists():
            self._certificates()
        return [
            self.binary,
            "--port",
            "0",
            "--tls-port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--tls-cert-file",
            str(d / "srv.crt"),
            "--tls-key-file",
            str(d / "srv.key"),
            "--tls-ca-cert-file",
            str(d / "ca.crt"),
            "--tls-auth-clients",
            "no",
            "--requirepass",
            PASSWORD,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(d),
        ]

    def _certificates(self) -> None:
        d = self.workdir
        openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        subprocess.run(
            [*openssl, "-keyout", d / "ca.key", "-out", d / "ca.crt", "-subj", "/CN=test-ca"],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                "openssl",
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                d / "srv.key",
                "-out",
                d / "srv.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )
        (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        subprocess.run(
            [
                "openssl",
                "x509",
                "-req",
                "-in",
                d / "srv.csr",
                "-CA",
                d / "ca.crt",
                "-CAkey",
                d / "ca.key",
                "-CAcreateserial",
                "-out",
                d / "srv.crt",
                "-days",
                "1",
                "-extfile",
                d / "san.ext",
            ],
            check=True,
            capture_output=True,
        )

    @property
    def url(self) -> str:
        ca = self.workdir / "ca.crt"
        return f"rediss://:{PASSWORD}@127.0.0.1:{self.port}/0?ssl_cert_reqs=required&ssl_ca_certs={ca}"


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[TlsRedis]:
    server = TlsRedis(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def tls_worker(tls_redis: TlsRedis, tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tls_redis.url, tmp_path)
    pool.start("tls1", "--sandbox", "stub")
    pool.wait_ready()
    yield pool
    pool.stop_all()


def trivial_specs(n: int, tree_digest: str, fixture_digest: str) -> list[TrialSpec]:
    return make_specs(n, run_id="tls", tree_digest=tree_digest, fixture_digest=fixture_digest)


def test_trials_flow_over_tls_with_a_password(tls_redis: TlsRedis, tls_worker: Workers, tmp_path: Path) -> None:
    """Blobs, batches and results all travel over rediss:// with a verified certificate and a password."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "probe.py").write_text("print('{}')\n")
    fixture = b"{}"
    digest = hashlib.sha256(fixture).hexdigest()
    with LocalInputs(tmp_path / "tree", {digest: fixture}) as inputs:
        executor = CeleryExecutor(tls_redis.url, worker_wait_s=30)
        seen = {o.key: o for o in executor.run(trivial_specs(40, inputs.tree_digest, digest), inputs)}
    assert len(seen) == 40 and all(o.fault is None and o.exit_code == 0 for o in seen.values())


def test_broker_refuses_a_client_without_the_password(tls_redis: TlsRedis) -> None:
    """A client that knows the host but not the password is turned away."""
    anonymous = tls_redis.url.replace(f":{PASSWORD}@", "")
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(anonymous).ping()


def test_plaintext_is_not_served(tls_redis: TlsRedis) -> None:
    """The TLS port does not answer a plaintext redis:// client."""
    plain = f"redis://:{PASSWORD}@127.0.0.1:{tls_redis.port}/0"
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(plain, socket_timeout=2).ping()


def test_worker_refuses_a_pickled_task(tls_redis: TlsRedis, tls_worker: Workers, tmp_path: Path) -> None:
    """A pickle-serialized message is rejected unexecuted: workers accept JSON only."""
    sender = make_app(tls_redis.url)
    sender.conf.accept_content = ["json", "pickle"]
    result = sender.send_task(
        TASK_RUN_BATCH, args=[{"template": "{}", "indices": []}], queue=queue_for(DEFAULT_IMAGE), serializer="pickle"
    )
    log = tmp_path / "tls1.log"
    give_up = time.monotonic() + 30
    while "disallowed" not in log.read_text().lower():  # ContentDisallowed, once the worker has refused it
        assert time.monotonic() < give_up, f"the worker never logged refusing the pickle: {log.read_text()[-1000:]}"
        time.sleep(0.1)
    assert result.state == "PENDING"  # never ran, so never reported
