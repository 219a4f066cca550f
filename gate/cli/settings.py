"""What the `gate` command takes from its environment, read once by the entry point (gate.cli.main) and
handed down on the parsed arguments (`args.settings`): nothing below it reads these variables.
docs/reference/settings.md holds their table, written from this model by `.ci/settings-table`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.io.envsettings import default_state_dir, read, seconds, setting

INTERPRETER_ENV = "PROBEGATE_INTERPRETER"
ENV_REQUIRE = "PROBEGATE_REQUIRE_SIGNED"
ENV_REGISTRY = "PROBEGATE_WORKERS"
SIGN_KEY_ENV = "PROBEGATE_SIGN_KEY"
ACCEPT_KEY_ENV = "PROBEGATE_ACCEPT_KEY"
ENV_ADMIN = "PROBEGATE_REDIS_ADMIN"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # gate.io.reports.STEP_SUMMARY_ENV, written out: parsing stays cheap
STATE_ENV = "PROBEGATE_STATE_DIR"  # gate.io.journal.STATE_ENV, written out: parsing loads no pydantic
DEFAULT_REGISTRY = Path(".probegate") / "workers.json"
DEFAULT_VISIBILITY_TIMEOUT_S = (
    600.0  # worker.celery.shared.app.VISIBILITY_TIMEOUT_S, written out: parsing loads no Celery
)


@dataclass(frozen=True)
class GateSettings:
    """The defaults the `gate` commands take from the environment under their flags."""

    interpreter: str | None = setting(
        INTERPRETER_ENV, "`fresh` or `warm`: how each trial's interpreter starts, under `--interpreter`"
    )
    registry: str | None = setting("PROBEGATE_REGISTRY", "the image registry run images go through, under `--registry`")
    queue: str | None = setting("PROBEGATE_QUEUE", "the Celery queue trials go to, under `--queue`")
    workers: Path = setting(
        ENV_REGISTRY, "the worker registry, under `--workers`", default=DEFAULT_REGISTRY, parse=Path
    )
    workers_named: bool = False  # whether the registry was named (the variable), not the default
    state_dir: Path = setting(
        STATE_ENV,
        "the coordinator's state folder (run journals)",
        default_factory=default_state_dir,
        parse=Path,
        shown="$XDG_STATE_HOME/probegate, else ~/.local/state/probegate",
    )
    sign_key: Path | None = setting(
        SIGN_KEY_ENV, "the private key cards are signed with, under `--sign-key`", parse=Path
    )
    accept_key: Path | None = setting(
        ACCEPT_KEY_ENV, "the public key `gate accept` requires a signature by, under `--key`", parse=Path
    )
    redis_admin: str | None = setting(
        ENV_ADMIN, "an admin URL of the broker (`gate workers`), under `--redis-admin-url`; keeps it out of ps"
    )
    broker: str | None = setting("PROBEGATE_BROKER", "the broker `gate doctor` checks, under `--broker`")
    ledger: str | None = setting("PROBEGATE_LEDGER", "the books `gate doctor` checks, under `--ledger`")
    visibility_timeout_s: float = setting(
        "PROBEGATE_VISIBILITY_TIMEOUT",
        "seconds before Redis hands an unanswered batch out again; the same on workers and coordinator",
        default=DEFAULT_VISIBILITY_TIMEOUT_S,
        parse=seconds,
    )
    step_summary: Path | None = setting(
        STEP_SUMMARY_ENV, "the file GitHub Actions shows on the job's page: the summary is appended to it", parse=Path
    )
    require_signed: bool = setting(
        ENV_REQUIRE, "deprecated and ignored (a warning says so when it is set)", default=False, parse=bool
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GateSettings:
        """The settings `env` gives; a value that does not parse is a usage error naming its variable."""
        given = {}
        if not env.get(STATE_ENV) and env.get("XDG_STATE_HOME"):
            given["state_dir"] = Path(env["XDG_STATE_HOME"]) / "probegate"
        return read(cls, env, workers_named=bool(env.get(ENV_REGISTRY)), **given)


def settings_of(args: object) -> GateSettings:
    """The settings the entry point put on `args` (none there: the defaults, nothing from the environment)."""
    found = getattr(args, "settings", None)
    return found if isinstance(found, GateSettings) else GateSettings()


def registry_of(args: object) -> Path:
    """--workers, else $PROBEGATE_WORKERS, else `.probegate/workers.json`."""
    given = getattr(args, "workers", None)
    return given if given is not None else settings_of(args).workers


def registry_named(args: object) -> bool:
    """Whether a registry was named (--workers or $PROBEGATE_WORKERS) rather than defaulted."""
    return getattr(args, "workers", None) is not None or settings_of(args).workers_named
