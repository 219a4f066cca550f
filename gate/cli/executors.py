"""Choosing where trials run: the one place that picks a concrete executor and sandbox."""

from __future__ import annotations

import os

from gate.run.executor import Executor, LocalExecutor
from gate.run.runner import RunRequest


def default_executor(request: RunRequest) -> Executor:
    """Celery over Redis with --broker, else the local pool over this machine's Docker.

    With Celery the run's image travels by content: through the registry PROBEGATE_REGISTRY names
    (host[:port]) when set, else through the blob store; PROBEGATE_QUEUE pins batches to a fleet
    started with `gate-worker serve --queue`. (Environment only until `gate run` has flags for them.)
    Imported late so that neither docker nor celery loads unless a run needs it."""
    if request.broker:
        from worker.celery.dispatch import CeleryExecutor

        options = {"image": request.image} if request.image else {}
        return CeleryExecutor(
            request.broker,
            worker_wait_s=request.worker_wait_s,
            result_timeout_s=request.result_timeout_s,
            registry=os.environ.get("PROBEGATE_REGISTRY") or None,
            queue=os.environ.get("PROBEGATE_QUEUE") or None,
            **options,
        )
    from worker.host.sandbox import DockerSandbox

    sandbox = DockerSandbox(image=request.image) if request.image else DockerSandbox()
    return LocalExecutor(sandbox, jobs=request.jobs)
