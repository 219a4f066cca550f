"""Container hygiene: every probe container carries labels naming its run, trial and the process
that started it, so none can outlive its purpose — removed after each trial, on interrupt by run
id, and at worker start when the process that started it is gone.
"""

from __future__ import annotations

import contextlib
import os
import socket

import docker

from gate.core.errors import SandboxError
from worker.host.engine import containers
from worker.host.treemount import sweep_mounts

LABEL_RUN, LABEL_PROPERTY, LABEL_TRIAL = "probegate.run", "probegate.property", "probegate.trial"
LABEL_HOST, LABEL_PID = "probegate.host", "probegate.pid"
LABEL_BATCH = "probegate.batch"


def sweep(client: docker.DockerClient, run_id: str | None = None, *, pid: int | None = None) -> int:
    """Force-remove containers labelled probegate.run (all runs, or one; of every process, or of `pid`);
    returns how many."""
    labels = [LABEL_RUN if run_id is None else f"{LABEL_RUN}={run_id}"]
    if pid is not None:
        labels.append(f"{LABEL_PID}={pid}")
    # sparse: no inspect per container, which fails when one is removed while we list (e.g. by its owner);
    # one already gone, or being removed by its owner right now, is not counted.
    return sum(container.remove() for container in containers(client, labels=labels))


def sweep_dead_workers(client: docker.DockerClient) -> int:
    """Remove containers that a process on this host started and no longer exists to remove (and
    the host dirs and tree mounts it left, worker/host/treemount.py)."""
    removed = 0
    for container in containers(client, labels=[f"{LABEL_HOST}={socket.gethostname()}"]):
        pid = int(container.labels.get(LABEL_PID, "0") or 0)
        if pid > 0 and _alive(pid):
            continue
        with contextlib.suppress(SandboxError):
            removed += container.remove()
    sweep_mounts(_alive)  # then the tree mounts and dirs of the same dead processes
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
