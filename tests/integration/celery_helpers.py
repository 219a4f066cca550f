"""Real processes for the distributed tests: a private redis-server and a private registry, each on
a free loopback port, and `gate-worker serve` processes, each in its own session so a test can
SIGKILL a whole worker."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from worker.celery.app import make_app

WORKER = [sys.executable, "-m", "worker.celery.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """redis-server on 127.0.0.1 only, no persistence: a restart loses every queued message."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            if os.environ.get("CI") == "true":
                pytest.fail("CI=true but redis-server is not installed")
            pytest.skip("redis-server is not installed")
        self.binary = binary
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        give_up = time.monotonic() + 10
        while time.monotonic() < give_up:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


REGISTRY_CONFIG = """version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""


class RegistryServer:
    """Debian's docker-registry on 127.0.0.1 only (the engine speaks plain http to loopback
    registries), storing in a temporary directory; no auth: only this machine can reach it."""

    BINARY = "/usr/bin/docker-registry"

    def __init__(self, workdir: Path) -> None:
        if not os.access(self.BINARY, os.X_OK):
            if os.environ.get("CI") == "true":
                pytest.fail("CI=true but docker-registry is not installed")
            pytest.skip("docker-registry is not installed (apt-get install docker-registry)")
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """What `--registry` takes: host:port."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        (self.workdir / "storage").mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.yml"
        config.write_text(REGISTRY_CONFIG.format(root=self.workdir / "storage", port=self.port))
        log = (self.workdir / "registry.log").open("wb")
        self.proc = subprocess.Popen([self.BINARY, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
        give_up = time.monotonic() + 15
        while time.monotonic() < give_up:
            if self.proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {(self.workdir / 'registry.log').read_text()[-1000:]}")
            try:
                with urllib.request.urlopen(f"http://{self.address}/v2/", timeout=1) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("docker-registry did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Workers:
    """`gate-worker serve` processes against one broker; stopped (and their containers swept) at teardown.
    Each signs with its own key, `<tmp>/<name>.key`; `urls` gives a worker its own broker URL (an ACL
    user), and `control_url` is what wait_ready pings with (default: `url`)."""

    def __init__(
        self, url: str, tmp: Path, env: dict[str, str] | None = None, *, control_url: str | None = None
    ) -> None:
        self.url = url
        self.control_url = control_url or url
        self.tmp = tmp
        self.env = {**os.environ, **(env or {})}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}

    def key(self, name: str) -> Path:
        """Where worker `name` keeps its signing key (created at its first start)."""
        return self.tmp / f"{name}.key"

    def start(self, name: str, *extra: str, concurrency: int = 1) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(
            [
                *WORKER,
                "serve",
                "--broker",
                self.urls.get(name, self.url),
                "--key",
                str(self.key(name)),
                "--concurrency",
                str(concurrency),
                "--name",
                f"{name}@%h",
                "--cache",
                str(self.tmp / f"cache-{name}"),
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        app = make_app(self.control_url)
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"worker {name} exited: {(self.tmp / f'{name}.log').read_text()[-2000:]}")
            replies = app.control.ping(timeout=0.5) or []
            seen = {key.split("@")[0] for reply in replies for key in reply}
            if set(self.procs) <= seen:
                return
        raise RuntimeError(f"workers not ready: {[(self.tmp / f'{n}.log').read_text()[-500:] for n in self.procs]}")

    def wait_busy(self, name: str, client, timeout: float = 90) -> None:
        """Wait until the worker runs a probe container: it opens a run's sandbox only for a batch it holds,
        so one of its containers means a batch is in flight there (a fixed sleep races a slow start)."""
        group = self.procs[name].pid  # started in its own session: its pool children share this group
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            running = client.containers.list(filters={"label": "probegate.pid", "status": "running"}, sparse=True)
            for container in running:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    # A sparse listing carries the labels at the top of attrs (no inspect, which races a removal).
                    if os.getpgid(int(container.attrs.get("Labels", {}).get("probegate.pid", ""))) == group:
                        return
            time.sleep(0.1)
        log = (self.tmp / f"{name}.log").read_text()[-500:]
        raise RuntimeError(f"worker {name} never ran a probe container: {log}")

    def kill(self, name: str) -> None:
        """SIGKILL the worker and its pool children at once, as a lost machine would vanish."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
