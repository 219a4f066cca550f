"""What `gate-worker` and its processes run with. Its entry point (worker/celery/worker/cli.py) reads
the environment once into a `WorkerSettings`, lays its flags over the `PoolSettings` part and `configure`s
it before Celery forks the pool processes, which inherit it; the modules below ask `current()`, never the
environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.io.envsettings import nested, read, seconds, setting
from gate.io.hostsettings import HostSettings
from worker.celery.shared.app import VISIBILITY_TIMEOUT_S

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
ENV_KEY = "PROBEGATE_WORKER_KEY"
ENV_RUN_IDLE = "PROBEGATE_RUN_IDLE_S"


def _home(*parts: str) -> Path:
    return Path.home().joinpath(*parts)


@dataclass(frozen=True)
class PoolSettings:
    """One worker's settings, as its pool processes see them."""

    broker: str = setting(
        "PROBEGATE_BROKER",
        "the broker URL, `redis://` or `rediss://` (`--broker` wins); keeps the password out of `ps`",
        default=DEFAULT_BROKER,
    )
    blobs: str | None = setting("PROBEGATE_BLOBS", "the blob store's URL when it is not the broker (`--blobs` wins)")
    sandbox: str = setting(
        "PROBEGATE_SANDBOX",
        "`docker`, or `stub` (worker.host.sandboxes.stub, a test and benchmark double: runs nothing)",
        default="docker",
    )
    image: str | None = setting(
        "PROBEGATE_IMAGE", "the image batches that name none run in (`--image` wins; unset: the bundled sandbox image)"
    )
    cache: Path = setting(
        "PROBEGATE_CACHE",
        "the blob cache (trees and fixtures by digest) and image spools (`--cache` wins); keep it on the file "
        "system of `TMPDIR`, so a container's tree is hard-linked rather than copied",
        default_factory=lambda: _home(".cache", "probegate"),
        parse=Path,
        shown="~/.cache/probegate",
    )
    registry: str | None = setting(
        "PROBEGATE_REGISTRY", "`HOST[:PORT]` of the registry run images are pulled from by digest (`--registry` wins)"
    )
    worker_id: str | None = setting(
        "PROBEGATE_WORKER_ID", "the identity this worker's observations carry (unset: its `--name`)"
    )
    key: Path = setting(
        ENV_KEY,
        "this worker's signing key, created 0600 at first start; `gate-worker key` prints its public half "
        "(`--key` wins)",
        default_factory=lambda: _home(".config", "probegate", "worker.key"),
        parse=Path,
        shown="~/.config/probegate/worker.key",
    )
    run_idle: str = setting(
        ENV_RUN_IDLE,
        "a run with no batch for this long is closed on this worker and its warm container removed (the "
        "coordinator's end-of-run broadcast usually does it at once); above 0 and below 40, or `serve` refuses",
        default="",
        shown="20",
    )
    visibility_timeout_s: float = setting(
        "PROBEGATE_VISIBILITY_TIMEOUT",
        "seconds before Redis hands an unanswered batch out again; the same on workers and coordinator",
        default=VISIBILITY_TIMEOUT_S,
        parse=seconds,
    )

    host: HostSettings = nested(HostSettings)  # the sandbox's: work copies, standing pool, tree mounts

    @property
    def stub_sandbox(self) -> bool:
        return self.sandbox == "stub"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PoolSettings:
        """The settings `env` gives; a value that does not parse is a usage error naming its variable."""
        return read(cls, env)


@dataclass(frozen=True)
class WorkerSettings:
    """What `gate-worker` takes from its environment, read once where it starts; the flags' defaults."""

    broker_file: Path = setting(
        "PROBEGATE_BROKER_FILE",
        "where `gate-worker join` writes this worker's name and own broker URL (0600), and where `serve` reads "
        "them without `--broker` (`--broker-file` wins)",
        default_factory=lambda: Path.home() / ".config" / "probegate" / "broker.json",
        parse=Path,
        shown="~/.config/probegate/broker.json",
    )
    broker: str | None = setting(
        "PROBEGATE_BROKER",
        "the broker URL, `redis://` or `rediss://` (`--broker` wins); keeps the password out of `ps`",
    )
    # What the pool processes run with, as the environment gives it (the flags are laid over it in serve).
    pool: PoolSettings = nested(PoolSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        """The settings `env` gives; a value that does not parse is a usage error naming its variable."""
        return read(cls, env)


_configured: PoolSettings | None = None


def configure(settings: PoolSettings) -> None:
    """Make `settings` this process's (and its future forks'): the entry point calls it."""
    global _configured
    _configured = settings


def current() -> PoolSettings:
    """The settings the entry point configured; the defaults (an empty environment's) when it did not."""
    return _configured if _configured is not None else PoolSettings.from_env({})
