"""`gate-worker preflight` proves the frozen clock and closed network on the real engine."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest
from run_containers import containers_of

from gate.core.errors import RET_HARNESS, RET_OK, RET_USAGE

pytestmark = pytest.mark.integration

WORKER = [sys.executable, "-m", "worker.celery.worker.cli"]


def test_preflight_passes_on_the_sandbox_image(sandbox_image: str) -> None:
    """Preflight exits 0 and reports the frozen instant for the probe and its scrubbed child, and no network."""
    done = subprocess.run([*WORKER, "preflight"], capture_output=True, text=True, timeout=120)
    assert done.returncode == RET_OK, done.stderr
    found = json.loads(done.stdout)
    assert found["image_id"] == sandbox_image
    assert found["time"] == found["child_time"] == 1772323200.0  # 2026-03-01T00:00:00Z
    assert found["timer"] and found["asyncio"]
    assert all(found[k].startswith("refused") for k in ("tcp", "loopback", "dns"))


def test_preflight_with_a_missing_image_is_a_harness_error(docker_client) -> None:
    """Preflight against an image that does not exist exits 2 with one line naming the image."""
    done = subprocess.run(
        [*WORKER, "preflight", "--image", "probegate/absent:0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == RET_HARNESS
    assert done.stderr.strip().splitlines() == [
        "gate-worker: error: sandbox image probegate/absent:0 is missing; run `gate setup` (or `gate doctor`)"
    ]


def test_unknown_worker_command_is_a_usage_error() -> None:
    """An unknown subcommand exits 64, not argparse's 2."""
    done = subprocess.run([*WORKER, "bogus"], capture_output=True, text=True, timeout=60)
    assert done.returncode == RET_USAGE and "Traceback" not in done.stderr


def test_gate_sweep_removes_only_what_it_is_asked_to(docker_client, sandbox_image: str) -> None:
    """`gate sweep --run` removes that run's containers; a bare sweep spares a container whose process lives."""
    import os

    labels = {"probegate.run": "sweep-test", "probegate.host": os.uname().nodename, "probegate.pid": str(os.getpid())}
    container = docker_client.containers.run(
        sandbox_image, ["python3", "-c", "import time; time.sleep(60)"], detach=True, network_mode="none", labels=labels
    )
    try:
        bare = subprocess.run([sys.executable, "-m", "gate.cli", "sweep"], capture_output=True, text=True, timeout=60)
        assert bare.returncode == RET_OK
        assert containers_of(docker_client, "sweep-test")()  # still there
        done = subprocess.run(
            [sys.executable, "-m", "gate.cli", "sweep", "--run", "sweep-test"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == RET_OK and json.loads(done.stdout)["removed"] == 1
        assert containers_of(docker_client, "sweep-test")() == []
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)
