"""What a worker's processes run with, read from the environment in this one place. `gate-worker serve`
(worker/celery/worker/cli.py, the entry point) writes these variables before Celery forks its pool
processes, which inherit them; the modules below it ask `current()`, never `os.environ`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
ENV_KEY = "PROBEGATE_WORKER_KEY"
ENV_RUN_IDLE = "PROBEGATE_RUN_IDLE_S"


@dataclass(frozen=True)
class PoolSettings:
    """One worker's settings, as its pool processes see them."""

    broker: str  # PROBEGATE_BROKER
    blobs: str | None  # PROBEGATE_BLOBS: the blob store, when it is not the broker
    sandbox: str  # PROBEGATE_SANDBOX: "docker", or "null" (no container: the dispatch benchmarks' worker)
    image: str | None  # PROBEGATE_IMAGE: the image batches that name none run in
    cache: Path  # PROBEGATE_CACHE: fetched blobs and image spools
    registry: str | None  # PROBEGATE_REGISTRY: where run images are pulled from, if anywhere
    worker_id: str | None  # PROBEGATE_WORKER_ID: the identity observations carry (set by serve)
    key: Path  # PROBEGATE_WORKER_KEY: this worker's signing key
    run_idle: str  # PROBEGATE_RUN_IDLE_S as given (worker.celery.worker.runs.run_idle_s checks it)

    @property
    def null_sandbox(self) -> bool:
        return self.sandbox == "null"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PoolSettings:
        home = Path.home()
        return cls(
            broker=env.get("PROBEGATE_BROKER") or DEFAULT_BROKER,
            blobs=env.get("PROBEGATE_BLOBS") or None,
            sandbox=env.get("PROBEGATE_SANDBOX") or "docker",
            image=env.get("PROBEGATE_IMAGE") or None,
            cache=Path(env.get("PROBEGATE_CACHE") or home / ".cache" / "probegate"),
            registry=env.get("PROBEGATE_REGISTRY") or None,
            worker_id=env.get("PROBEGATE_WORKER_ID") or None,
            key=Path(env.get(ENV_KEY) or home / ".config" / "probegate" / "worker.key"),
            run_idle=env.get(ENV_RUN_IDLE, ""),
        )


def current() -> PoolSettings:
    """This process's settings, read now: the entry point sets some after this module is imported."""
    return PoolSettings.from_env(os.environ)
