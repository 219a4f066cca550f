"""Choosing where trials run: the one place that picks a concrete executor and sandbox."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gate.core.enrolment import Roster
from gate.core.errors import ConfigError
from gate.io.workers import ENV_REGISTRY, load_roster, registry_path, signing_required
from gate.run.executor import Executor, LocalExecutor
from gate.run.runner import RunRequest


def default_executor(request: RunRequest) -> Executor:
    """Celery over Redis with --broker, else the local pool over this machine's Docker.

    With Celery the run's image travels by content: through `--registry` (host[:port]) when given,
    else through the blob store; `--queue` pins batches to a fleet started with `gate-worker serve
    --queue`. With a worker registry only signed results of enrolled workers count. Imported late so
    that neither docker nor celery loads unless a run needs it."""
    if request.broker:
        from worker.celery.dispatch import CeleryExecutor

        options = {"image": request.image} if request.image else {}
        return CeleryExecutor(
            request.broker,
            enrolled=enrolled_workers(request.workers),
            worker_wait_s=request.worker_wait_s,
            result_timeout_s=request.result_timeout_s,
            registry=request.registry,
            queue=request.queue,
            **options,
        )
    from worker.host.sandbox import DockerSandbox

    sandbox = DockerSandbox(image=request.image) if request.image else DockerSandbox()
    return LocalExecutor(sandbox, jobs=request.jobs)


def enrolled_workers(given: Path | None) -> Callable[[], Roster] | None:
    """The registry the Celery executor checks results against (read now, so a broken one stops the run
    before any trial, and again at each run); None: no registry, and none required."""
    path = registry_path(given)
    named = given is not None or bool(os.environ.get(ENV_REGISTRY))
    if not named and not path.exists():
        if signing_required():
            raise ConfigError(
                f"signed results are required ($PROBEGATE_REQUIRE_SIGNED) but there is no worker registry "
                f"(enrol workers with `gate workers enrol`, or name one with --workers / ${ENV_REGISTRY})",
                file=str(path),
            )
        return None
    load_roster(path)  # a named registry that is missing or garbled is refused now
    return lambda: load_roster(path)
