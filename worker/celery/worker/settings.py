"""What a worker's processes run with. `gate-worker` (worker/celery/worker/cli.py, the entry point) reads
the environment once into a `PoolSettings`, lays its flags over it and `configure`s it before Celery forks
the pool processes, which inherit it; the modules below ask `current()`, never the environment."""

from __future__ import annotations

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
    sandbox: str  # PROBEGATE_SANDBOX: "docker", or "stub" (worker.host.sandboxes.stub: a test double)
    image: str | None  # PROBEGATE_IMAGE: the image batches that name none run in
    cache: Path  # PROBEGATE_CACHE: fetched blobs and image spools
    registry: str | None  # PROBEGATE_REGISTRY: where run images are pulled from, if anywhere
    worker_id: str | None  # PROBEGATE_WORKER_ID: the identity observations carry (set by serve)
    key: Path  # PROBEGATE_WORKER_KEY: this worker's signing key
    run_idle: str  # PROBEGATE_RUN_IDLE_S as given (worker.celery.worker.runs.run_idle_s checks it)

    @property
    def stub_sandbox(self) -> bool:
        return self.sandbox == "stub"

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


_configured: PoolSettings | None = None


def configure(settings: PoolSettings) -> None:
    """Make `settings` this process's (and its future forks'): the entry point calls it."""
    global _configured
    _configured = settings


def current() -> PoolSettings:
    """The settings the entry point configured; the defaults (an empty environment's) when it did not."""
    return _configured if _configured is not None else PoolSettings.from_env({})
