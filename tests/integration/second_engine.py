"""A second, private Docker engine on this machine: what a throwaway worker server looks like to a
coordinator. It shares nothing with the main engine (its own data root, socket, exec root and
containerd namespace) and holds only the base sandbox image, loaded from the main engine as a
fresh server would build it. Workers started with `env` run their containers there."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import docker
import pytest

from worker.host.engine import DEFAULT_IMAGE


class SecondEngine:
    def __init__(self) -> None:
        binary = shutil.which("dockerd")
        if binary is None:
            if os.environ.get("CI") == "true":
                pytest.fail("CI=true but dockerd is not installed")
            pytest.skip("dockerd is not installed")
        if os.geteuid() != 0:
            pytest.skip("a second engine needs root")
        self.binary = binary
        # On disk, not under /tmp: overlay2 cannot use a tmpfs upper layer on every kernel.
        # Hex only after the dash: the engine names its containerd namespace after this folder, and mkdtemp's
        # random part may hold "_", which containerd refuses next to "-" or at the end (seen once: "engine-_34y988d").
        self.root = Path("/var/tmp") / f"probegate-engine-{uuid.uuid4().hex[:12]}"
        self.root.mkdir(mode=0o700)
        self.socket = self.root / "docker.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def _ns(self) -> str:
        return f"probegate-{self.root.name}"

    @property
    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": f"unix://{self.socket}"}

    def start(self, main: docker.DockerClient | None) -> docker.DockerClient:
        """Start the engine (no bridge, no iptables: nothing in it has a network) and load the base image
        from `main` (None: it stays empty, as on a machine where `gate setup` never ran)."""
        client = self._launch("wb")
        if main is not None:
            client.api.load_image(main.api.get_image(DEFAULT_IMAGE))
        return client

    def restart(self) -> docker.DockerClient:
        """Start the engine again on the same data root (after kill()): it takes back what it left there."""
        # What the killed engine's containers still run is killed first: the engine would stop each one it
        # finds alive with SIGTERM, which their init ignores, and SIGKILL only after 10 s.
        for pid in self._orphans():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # The dead containerd's pid file goes: until init reaps its zombie, dockerd takes that pid for a live
        # containerd and waits for its socket instead of starting one (seen: "timeout waiting for containerd").
        (self.root / "exec" / "containerd" / "containerd.pid").unlink(missing_ok=True)
        return self._launch("ab")

    def kill(self) -> None:
        """SIGKILL dockerd, as a crash would, and wait until it and its containerd are dead; shims live on."""
        assert self.proc is not None and self.proc.poll() is None, "the second engine is not running"
        pidfd = None
        # No pid file: the engine uses the machine's own containerd, which is not its to take down.
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            pidfd = os.pidfd_open(int((self.root / "exec" / "containerd" / "containerd.pid").read_text()))
        self.proc.send_signal(signal.SIGKILL)  # containerd follows: dockerd starts it with a parent-death signal
        self.proc.wait(timeout=30)
        if pidfd is not None:
            try:  # readable once the process has exited, zombie or not
                assert select.select([pidfd], [], [], 30)[0], "containerd outlived its dockerd"
            finally:
                os.close(pidfd)

    def _launch(self, log_mode: str) -> docker.DockerClient:
        """Start dockerd on this engine's folders and wait until it answers; its log goes to dockerd.log."""
        ns = self._ns
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--data-root", str(self.root / "data"),
                "--exec-root", str(self.root / "exec"),
                "--pidfile", str(self.root / "docker.pid"),
                "-H", f"unix://{self.socket}",
                "--bridge=none",
                "--iptables=false",
                "--containerd-namespace", ns,
                "--containerd-plugins-namespace", f"{ns}-plugins",
            ],
            stdout=(self.root / "dockerd.log").open(log_mode),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        give_up = time.monotonic() + 30
        while True:
            try:
                client = docker.DockerClient(base_url=f"unix://{self.socket}", timeout=120)
                client.ping()
                return client
            except docker.errors.DockerException:
                if self.proc.poll() is not None or time.monotonic() > give_up:
                    log = (self.root / "dockerd.log").read_text()[-800:]
                    raise RuntimeError(f"second dockerd did not start: {log}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # dockerd unmounts its layers on the way out
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        # dockerd binds its data root onto itself and undoes it on SIGTERM, but one started again after kill()
        # finds that bind in place and leaves it: unmount whatever is below the folder, deepest first.
        while below := self._mounts():
            subprocess.run(["umount", below[0]], capture_output=True, check=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def _orphans(self) -> list[int]:
        """The init processes of this engine's containers: the children of its namespace's containerd shims."""
        shims = []
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if b"-namespace" in argv and argv[argv.index(b"-namespace") + 1 :][:1] == [self._ns.encode()]:
                    shims.append(proc)
        return [int(pid) for shim in shims for task in shim.glob("task/*") for pid in _children(task)]

    def _mounts(self) -> list[str]:
        """The mount points at or below this engine's folder, deepest first."""
        points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        return sorted((p for p in points if p == str(self.root) or p.startswith(f"{self.root}/")), reverse=True)


def _children(task: Path) -> list[str]:
    with contextlib.suppress(OSError):
        return (task / "children").read_text().split()
    return []
