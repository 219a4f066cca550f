"""Real processes for the distributed tests and the benchmarks: a private redis-server and a private registry,
each on a free loopback port, and `gate-worker serve` processes (or a lying stand-in), each in its own session
so a test can SIGKILL a whole worker."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import kombu.exceptions
import pytest
import redis.exceptions

from gate.io.keys import public_path, write_new_key
from worker.celery.shared.app import SHARED_QUEUE, make_app

from .paths import INTEGRATION

WORKER = [sys.executable, "-m", "worker.celery.worker.cli"]

# Below the kernel's ephemeral range (32768-60999 by default): no outgoing connection is ever given one
# of these as its local port, so a server that lets go of its port for a restart can bind it again.
PORTS = range(20000, 32000)

GATE = str(Path(sys.executable).with_name("gate"))
FABRICATOR = INTEGRATION / "fabricating_worker.py"  # the stand-in worker that lies (run as a script)


def free_port() -> int:
    """A loopback port nothing is bound to right now. Another process (another xdist worker) may take it
    before the caller binds it: servers started on it retry on a new port (LoopbackServer.start)."""
    for _ in range(1000):
        port = random.choice(PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {PORTS.start}-{PORTS.stop - 1}")


@contextlib.contextmanager
def unserved_port(port: int | None = None, timeout: float = 10) -> Iterator[int]:
    """A loopback port held bound but not listening for the block: a connection to it is refused, and no
    other test's server can take it meanwhile (a port that is merely free now may be served a moment later).
    `port`: one a server of this test just let go of (waits up to `timeout` for it to be released)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the killed server's TIME_WAIT sockets
        give_up = time.monotonic() + timeout
        while True:
            try:
                sock.bind(("127.0.0.1", port or free_port()))
                break
            except OSError:
                if time.monotonic() > give_up:
                    raise RuntimeError(f"could not hold loopback port {port} within {timeout} s") from None
                time.sleep(0.05)
        yield sock.getsockname()[1]


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds a listening socket on 127.0.0.1:`port` (and not some other
    process that took the port first: then this one's bind failed)."""
    wanted = f"0100007F:{port:04X}"
    inodes = set()
    with contextlib.suppress(OSError), open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1] == wanted and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return True
    return False


class LoopbackServer:
    """A server process listening on one 127.0.0.1 port, its output in `workdir`. `start` retries on a new
    port when the chosen one was taken before the server could bind it; a restart keeps its port (clients
    hold the URL) and retries that one."""

    name = "server"
    start_timeout = 15.0

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._started_once = False

    def argv(self) -> list[str]:
        raise NotImplementedError

    def answers(self) -> bool:
        """Whether the server, listening, also serves (subclasses ask it something); True by default."""
        return True

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        give_up = time.monotonic() + self.start_timeout
        while True:
            with self.log.open("wb") as log:
                self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
            while self.proc.poll() is None and time.monotonic() < give_up:
                if listens(self.proc.pid, self.port) and self.answers():
                    self._started_once = True
                    return
                time.sleep(0.05)
            said = self.log.read_text(errors="replace")[-1500:]
            if self.proc.poll() is None:
                self.stop()
                raise RuntimeError(
                    f"{self.name} never listened on 127.0.0.1:{self.port} ({self.start_timeout} s): {said}"
                )
            if "address already in use" not in said.lower() or time.monotonic() > give_up:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}) on port {self.port}: {said}")
            # Another process bound the port between free_port() and the server's bind.
            if self._started_once:
                time.sleep(0.1)
            else:
                self.port = free_port()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """Stopped for the block, its port held (refusing connections) so no other server takes it; started
        again on the same port afterwards."""
        self.stop()
        with unserved_port(self.port):
            yield
        self.start()


class RedisServer(LoopbackServer):
    """redis-server on 127.0.0.1 only, no data persistence (a restart loses every queued message); its ACL
    users are kept in an ACL file."""

    name = "redis-server"

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            if os.environ.get("CI") == "true":
                pytest.fail("CI=true but redis-server is not installed")
            pytest.skip("redis-server is not installed")
        self.binary = binary
        super().__init__(workdir)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        return [
            *(self.binary, "--port", str(self.port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(self.workdir)),
            # Its users kept across a restart, as deploy/docker-compose.yml keeps them (`gate workers enrol`
            # saves them there): an enrolled worker reconnects after `down()`.
            *("--aclfile", str(self.acl_file())),
        ]

    def acl_file(self) -> Path:
        path = self.workdir / "users.acl"
        path.touch()
        return path


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


class RegistryServer(LoopbackServer):
    """Debian's docker-registry on 127.0.0.1 only (the engine speaks plain http to loopback
    registries), storing in a temporary directory; no auth: only this machine can reach it."""

    BINARY = "/usr/bin/docker-registry"
    name = "docker-registry"

    def __init__(self, workdir: Path) -> None:
        if not os.access(self.BINARY, os.X_OK):
            if os.environ.get("CI") == "true":
                pytest.fail("CI=true but docker-registry is not installed")
            pytest.skip("docker-registry is not installed (apt-get install docker-registry)")
        super().__init__(workdir)

    @property
    def address(self) -> str:
        """What `--registry` takes: host:port."""
        return f"127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        (self.workdir / "storage").mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.yml"
        config.write_text(REGISTRY_CONFIG.format(root=self.workdir / "storage", port=self.port))
        return [self.BINARY, "serve", str(config)]

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.address}/v2/", timeout=1) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False


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
            # Asked by name: the reply comes once every worker answered, not at the end of the reply window.
            names = [f"{name}@{socket.gethostname()}" for name in self.procs]
            try:
                replies = app.control.ping(timeout=0.5, destination=names) or []
            except (redis.exceptions.ConnectionError, kombu.exceptions.OperationalError):
                # A dropped control connection is no answer about the workers: ask again on a fresh one.
                app.close()
                app = make_app(self.control_url)
                continue
            seen = {key.split("@")[0] for reply in replies for key in reply}
            if set(self.procs) <= seen:
                return
        raise RuntimeError(f"workers not ready: {[(self.tmp / f'{n}.log').read_text()[-500:] for n in self.procs]}")

    def wait_busy(self, name: str, client, timeout: float = 90) -> None:
        """Wait until the worker runs a probe container of a run: it opens a run's sandbox only for a batch it
        holds, so one means a batch is in flight there (a fixed sleep races a slow start). Its start-up
        preflight's container (run `preflight-…`) is no batch."""
        group = self.procs[name].pid  # started in its own session: its pool children share this group
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            running = client.containers.list(filters={"label": "probegate.pid", "status": "running"}, sparse=True)
            for container in running:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    # A sparse listing carries the labels at the top of attrs (no inspect, which races a removal).
                    labels = container.attrs.get("Labels", {})
                    preflight = labels.get("probegate.run", "").startswith("preflight-")
                    if not preflight and os.getpgid(int(labels.get("probegate.pid", ""))) == group:
                        return
            time.sleep(0.1)
        log = (self.tmp / f"{name}.log").read_text()[-500:]
        raise RuntimeError(f"worker {name} never ran a probe container: {log}")

    def kill(self, name: str) -> None:
        """SIGKILL the worker and its pool children at once, as a lost machine would vanish."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def vanish(self, name: str, client) -> int:
        """SIGKILL the worker's whole process group and remove its containers, as a server powered off; how
        many containers were removed."""
        group = self.procs[name].pid
        mine: list = []
        for container in client.containers.list(filters={"label": "probegate.pid"}, sparse=True):
            with contextlib.suppress(ProcessLookupError, ValueError):
                if os.getpgid(int(container.attrs.get("Labels", {}).get("probegate.pid", ""))) == group:
                    mine.append(container)
        self.kill(name)
        for container in mine:
            with contextlib.suppress(Exception):
                container.remove(force=True)
        return len(mine)

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


def enrol(
    workers: Workers,
    registry: Path,
    *names: str,
    admin: str | None = None,
    new_keys: bool = True,
    owned: tuple[str, ...] = (),
) -> None:
    """Make each worker's key (`new_keys`; else enrol the key it has) and enrol it as `box-<name>` (those in
    `owned` as owned workers); with `admin` (the broker's admin URL) also make its own broker user, which the
    worker then connects as."""
    for name in names:
        if new_keys:
            write_new_key(workers.key(name))
        done = subprocess.run(
            [GATE, "workers", "enrol", str(public_path(workers.key(name))), "--name", f"box-{name}",
             "--workers", str(registry), *(("--redis-admin-url", admin) if admin else ()),
             *(("--owned",) if name in owned else ())],
            capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        if admin:
            workers.urls[name] = json.loads(done.stdout)["broker_url"]


def start_fabricator(
    workers: Workers, name: str, *, queue: str = SHARED_QUEUE, signed: bool = False, lies: str | None = None
) -> None:
    """The stand-in worker (tests/integration/fabricating_worker.py) in its own session, registered with `workers`
    so `wait_ready` and teardown cover it: it consumes `queue` and its own direct queue like a real worker, signs
    with its own key (`workers.key(name)`) when `signed`, as an enrolled liar would, and lies as `lies` says
    (`PROBEGATE_FABRICATE`; None: it scrubs the safety evidence)."""
    log = (workers.tmp / f"{name}.log").open("wb")
    key = [str(workers.key(name))] if signed else []
    env = workers.env if lies is None else {**workers.env, "PROBEGATE_FABRICATE": lies}
    workers.procs[name] = subprocess.Popen(
        [
            *(sys.executable, str(FABRICATOR), workers.url, f"{name}@%h", queue),
            *(str(workers.tmp / f"cache-{name}"), *key),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def start_statistical_liar(workers: Workers, name: str, lies: str = "statistical") -> None:
    """The stand-in, signing with its enrolled key, on the shared queue, fabricating hits on statistical trials
    only (`statistical` on every one, `statistical:N` on its first N misses)."""
    start_fabricator(workers, name, signed=True, lies=lies)
