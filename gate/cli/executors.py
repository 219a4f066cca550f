"""Choosing where trials run: the one place that picks a concrete executor and sandbox."""

from __future__ import annotations

from gate.run.executor import Executor, LocalExecutor
from gate.run.runner import RunRequest


def default_executor(request: RunRequest) -> Executor:
    """Celery over Redis with --broker, else the local pool over this machine's Docker.

    With Celery the run's image travels by content: through `--registry` (host[:port]) when given,
    else through the blob store; `--queue` pins batches to a fleet started with `gate-worker serve
    --queue`. Imported late so that neither docker nor celery loads unless a run needs it."""
    if request.broker:
        from worker.celery.dispatch import CeleryExecutor

        options = {"image": request.image} if request.image else {}
        return CeleryExecutor(
            request.broker,
            worker_wait_s=request.worker_wait_s,
            result_timeout_s=request.result_timeout_s,
            registry=request.registry,
            queue=request.queue,
            **options,
        )
    from worker.host.sandbox import DockerSandbox

    sandbox = DockerSandbox(image=request.image) if request.image else DockerSandbox()
    return LocalExecutor(sandbox, jobs=request.jobs)
