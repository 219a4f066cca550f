"""A second, private Docker engine on this machine: what a throwaway worker server looks like to a
coordinator. It shares nothing with the main engine (its own data root, socket, exec root and
containerd namespace) and holds only the base sandbox image, loaded from the main engine as a
fresh server would build it. Workers started with `env` run their containers there."""

from __future__ import annotations

import os
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
    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": f"unix://{self.socket}"}

    def start(self, main: docker.DockerClient | None) -> docker.DockerClient:
        """Start the engine (no bridge, no iptables: nothing in it has a network) and load the base image
        from `main` (None: it stays empty, as on a machine where `gate setup` never ran)."""
        ns = f"probegate-{self.root.name}"
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
            stdout=(self.root / "dockerd.log").open("wb"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        give_up = time.monotonic() + 30
        while True:
            try:
                client = docker.DockerClient(base_url=f"unix://{self.socket}", timeout=120)
                client.ping()
                break
            except docker.errors.DockerException:
                if self.proc.poll() is not None or time.monotonic() > give_up:
                    log = (self.root / "dockerd.log").read_text()[-800:]
                    raise RuntimeError(f"second dockerd did not start: {log}") from None
                time.sleep(0.2)
        if main is not None:
            client.api.load_image(main.api.get_image(DEFAULT_IMAGE))
        return client

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # dockerd unmounts its layers on the way out
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        subprocess.run(["umount", "-R", str(self.root)], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
