"""What the Docker engine holds, and held, for one run: the tests' one way to look for leftovers
and to count how many containers a run started."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Sequence

import docker

from worker.host.sweep import LABEL_HOST, LABEL_PID, LABEL_RUN


def containers_of(client: docker.DockerClient, run_id: str) -> Callable[[], list]:
    """A listing of the run's containers (sparse: a container removed while we list cannot fail it)."""
    return lambda: client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"}, sparse=True)


def gone_within(listing: Callable[[], list], timeout: float) -> float | None:
    """Seconds until `listing` came back empty, or None if it never did within `timeout`.

    Workers remove a run's containers when the coordinator's close broadcast reaches them, a few
    hundred milliseconds after the run returns, so Celery tests wait for it rather than race it."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not listing():
            return time.monotonic() - started
        time.sleep(0.1)
    return None


def containers_created(client: docker.DockerClient, run_id: str, since: float) -> int:
    """How many containers labelled with `run_id` the engine created since `since` (a Unix time),
    read from its event log up to now."""
    until = int(time.time()) + 1  # the events call returns once `until` has passed
    filters = {"type": "container", "event": "create", "label": f"{LABEL_RUN}={run_id}"}
    return sum(1 for _ in client.events(since=int(since) - 1, until=until, filters=filters, decode=True))


def run_counting_containers(
    client: docker.DockerClient, cmd: Sequence[str], *, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run `cmd` (a `gate` command) to its end; returns it and how many containers it created, read from
    the engine's event log by the labels every sandbox container carries (this host, the process id)."""
    since = time.time()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        out, err = proc.communicate(timeout=timeout)
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    until = int(time.time()) + 1
    labels = [f"{LABEL_PID}={proc.pid}", f"{LABEL_HOST}={socket.gethostname()}"]
    filters = {"type": "container", "event": "create", "label": labels}
    return done, sum(1 for _ in client.events(since=int(since) - 1, until=until, filters=filters, decode=True))


def probe_running(client: docker.DockerClient, pid: int) -> bool:
    """A container the process `pid` started runs a probe (a trial in flight, not an idle supervisor)."""
    mine = {"label": f"{LABEL_PID}={pid}", "status": "running"}
    for container in client.containers.list(filters=mine, sparse=True):
        try:
            processes = container.top()["Processes"] or []
        except docker.errors.APIError:
            continue  # removed or stopping meanwhile
        if any("probe.py" in " ".join(p) for p in processes):
            return True
    return False
