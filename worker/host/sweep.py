"""Container hygiene: every probe container carries labels naming its run, trial and the process
that started it, so none can outlive its purpose — removed after each trial, on interrupt by run
id, and at worker start when the process that started it is gone.
"""

from __future__ import annotations

import contextlib
import os
import socket

import docker
import docker.errors

from worker.host.image import DOCKER_ERRORS

LABEL_RUN, LABEL_PROPERTY, LABEL_TRIAL = "probegate.run", "probegate.property", "probegate.trial"
LABEL_HOST, LABEL_PID = "probegate.host", "probegate.pid"
LABEL_BATCH = "probegate.batch"


def sweep(client: docker.DockerClient, run_id: str | None = None) -> int:
    """Force-remove containers labelled probegate.run (all runs, or one); returns how many."""
    label = LABEL_RUN if run_id is None else f"{LABEL_RUN}={run_id}"
    removed = 0
    # sparse: no inspect per container, which fails when one is removed while we list (e.g. by its owner)
    for container in client.containers.list(all=True, filters={"label": label}, sparse=True):
        try:
            container.remove(force=True)
            removed += 1
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            # 409: its owner (a worker closing the run) is removing it right now: it is going anyway.
            if exc.status_code != 409:
                raise
    return removed


def sweep_dead_workers(client: docker.DockerClient) -> int:
    """Remove containers that a process on this host started and no longer exists to remove."""
    removed = 0
    for container in client.containers.list(all=True, filters={"label": f"{LABEL_HOST}={socket.gethostname()}"}):
        pid = int(container.labels.get(LABEL_PID, "0") or 0)
        if pid > 0 and _alive(pid):
            continue
        with contextlib.suppress(*DOCKER_ERRORS):
            container.remove(force=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
