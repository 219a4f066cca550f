"""Choosing where trials run: the one place that picks a concrete executor and sandbox."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.cli.settings import DEFAULT_VISIBILITY_TIMEOUT_S, ENV_REGISTRY, GateSettings
from gate.core.errors import ConfigError
from gate.io.hostsettings import HostSettings

if TYPE_CHECKING:  # the run machinery loads only for a command that runs (argument parsing stays cheap)
    from gate.core.trust.enrolment import Roster
    from gate.run.executors.base import Executor
    from gate.run.request import ExecutorFactory


@dataclass(frozen=True)
class Placement:
    """Where the command line sends trials: the local pool (`jobs` threads), or Celery over `broker`."""

    jobs: int | None = None
    broker: str | None = None
    registry: str | None = None  # with a broker: where the run's image is pushed for workers to pull
    queue: str | None = None  # with a broker: the fleet's queue (None: the shared one)
    worker_wait_s: float = 30.0
    result_timeout_s: float | None = None
    visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S  # with a broker: $PROBEGATE_VISIBILITY_TIMEOUT
    host: HostSettings = field(default_factory=HostSettings)  # without: the local pool's sandbox settings
    room: int | None = None  # with a broker: batches each worker process may hold at once (None: the default)
    # With a broker: the worker registry results are checked against (`enrolled_workers`); None there
    # only with --allow-unenrolled-workers.
    enrolled: Callable[[], Roster] | None = None

    @property
    def unenrolled(self) -> bool:
        """Whether trials go to workers whose results no registry checks (the card records it)."""
        return self.broker is not None and self.enrolled is None


def executor_factory(placement: Placement) -> ExecutorFactory:
    """The run's executor factory: Celery over Redis with a broker, else the local pool over this
    machine's Docker; either runs trials in the image the run hands it (None: the sandbox's own)."""

    def make(image: str | None) -> Executor:
        return default_executor(placement, image, placement.enrolled)

    return make


def default_executor(placement: Placement, image: str | None, enrolled: Callable[[], Roster] | None) -> Executor:
    """Celery over Redis with a broker, else the local pool over this machine's Docker.

    With Celery the run's image travels by content: through `--registry` (host[:port]) when given,
    else through the blob store; `--queue` pins batches to a fleet started with `gate-worker serve
    --queue`. With a worker registry only signed results of enrolled workers count. Imported late so
    that neither docker nor celery loads unless a run needs it."""
    if placement.broker:
        from worker.celery.coordinator.dispatch import CeleryExecutor

        options: dict[str, Any] = {"image": image} if image else {}
        if placement.room is not None:
            options["room_per_process"] = placement.room
        return CeleryExecutor(
            placement.broker,
            enrolled=enrolled,
            worker_wait_s=placement.worker_wait_s,
            result_timeout_s=placement.result_timeout_s,
            visibility_timeout_s=placement.visibility_timeout_s,
            registry=placement.registry,
            queue=placement.queue,
            **options,
        )
    from gate.run.executors.local import LocalExecutor
    from worker.host.sandboxes.docker import DockerSandbox

    sandbox = DockerSandbox(image=image, host=placement.host) if image else DockerSandbox(host=placement.host)
    return LocalExecutor(sandbox, jobs=placement.jobs)


def enrolled_workers(
    given: Path | None, *, allow_unenrolled: bool = False, settings: GateSettings | None = None
) -> Callable[[], Roster] | None:
    """The registry the Celery executor checks results against (read now, so a broken one stops the run
    before any trial, and again at each run). No registry is refused, unless `allow_unenrolled`
    (--allow-unenrolled-workers): then None, and results are checked against nothing."""
    from gate.io.workers import load_roster

    settings = settings or GateSettings()
    path = given if given is not None else settings.workers
    named = given is not None or settings.workers_named
    if not named and not path.exists():
        if not allow_unenrolled:
            # Secure by default: without a registry any process that can write to the broker decides the run.
            raise ConfigError(
                "no worker registry, so any process that can write to the broker could answer for a worker: "
                "enrol each worker with `gate workers enrol PUBKEY_FILE --name NAME` (its key from "
                f"`gate-worker key`), name a registry with --workers or ${ENV_REGISTRY}, or pass "
                "--allow-unenrolled-workers (a loopback broker on this machine)",
                file=str(path),
                field="--broker",
            )
        return None
    load_roster(path)  # a named registry that is missing or garbled is refused now
    return lambda: load_roster(path)
