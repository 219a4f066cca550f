"""What the `gate` command takes from its environment, read once by the entry point (gate.cli.main) and
handed down on the parsed arguments (`args.settings`): nothing below it reads these variables.
docs/reference/settings.md holds their table, written from this model by `.ci/settings-table`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.io.envsettings import default_state_dir, markdown, nested, read, seconds, setting
from gate.io.hostsettings import HostSettings

INTERPRETER_ENV = "PROBEGATE_INTERPRETER"
ENV_REQUIRE = "PROBEGATE_REQUIRE_SIGNED"
ENV_REGISTRY = "PROBEGATE_WORKERS"
SIGN_KEY_ENV = "PROBEGATE_SIGN_KEY"
ACCEPT_KEY_ENV = "PROBEGATE_ACCEPT_KEY"
ENV_ADMIN = "PROBEGATE_REDIS_ADMIN"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # gate.io.reports.STEP_SUMMARY_ENV, written out: parsing stays cheap
STATE_ENV = "PROBEGATE_STATE_DIR"  # gate.io.journal.STATE_ENV, written out: parsing loads no pydantic
DEFAULT_REGISTRY = Path(".probegate") / "workers.json"
# worker.celery.shared.app.VISIBILITY_TIMEOUT_S, written out: parsing loads no Celery.
DEFAULT_VISIBILITY_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class GateSettings:
    """The defaults the `gate` commands take from the environment under their flags."""

    interpreter: str | None = setting(
        INTERPRETER_ENV,
        "`fresh` or `warm`: every trial of `run`, `baseline` and `flakes explain` in that interpreter mode "
        "(`--interpreter` wins; unset: the suite's `interpreter`)",
    )
    registry: str | None = setting(
        "PROBEGATE_REGISTRY",
        "`HOST[:PORT]` of a registry `gate run --broker` pushes run images to, for workers to pull by digest "
        "(`--registry` wins)",
    )
    queue: str | None = setting(
        "PROBEGATE_QUEUE",
        "the Celery queue `gate run --broker` sends batches to (`--queue` wins; unset: the shared one)",
    )
    workers: Path = setting(
        ENV_REGISTRY,
        "the worker registry file of `run`, `baseline`, `workers` and `doctor` (`--workers` wins)",
        default=DEFAULT_REGISTRY,
        parse=Path,
    )
    workers_named: bool = False  # whether the registry was named (the variable), not the default
    state_dir: Path = setting(
        STATE_ENV,
        "the coordinator's state folder, holding run journals under `journals/`; refused inside the patched "
        "tree or the git repository holding it (exit 64)",
        default_factory=default_state_dir,
        parse=Path,
        shown="$XDG_STATE_HOME/probegate, else ~/.local/state/probegate",
    )
    sign_key: Path | None = setting(
        SIGN_KEY_ENV,
        "the card-signing private key of `run`, `sign` and `doctor` (`--sign-key`, `--key` win)",
        parse=Path,
    )
    accept_key: Path | None = setting(
        ACCEPT_KEY_ENV,
        "a public key: `gate accept` then requires a card signed by it (`--key` wins; it wins over the suite's "
        "`public_key`)",
        parse=Path,
    )
    redis_admin: str | None = setting(
        ENV_ADMIN,
        "the broker's admin URL, with which `gate workers` makes and deletes per-worker broker users "
        "(`--redis-admin-url` wins); keeps the password out of `ps`",
    )
    broker: str | None = setting(
        "PROBEGATE_BROKER", "the broker `gate doctor` checks and `gate view` reads heartbeats from (`--broker` wins)"
    )
    ledger: str | None = setting(
        "PROBEGATE_LEDGER", "the books `gate doctor` checks: a file or a `redis://` URL (`--ledger` wins)"
    )
    visibility_timeout_s: float = setting(
        "PROBEGATE_VISIBILITY_TIMEOUT",
        "seconds before Redis hands an unanswered batch out again; set the same on workers and coordinator "
        "(a batch's summed deadlines stay under half of it)",
        default=DEFAULT_VISIBILITY_TIMEOUT_S,
        parse=seconds,
    )
    step_summary: Path | None = setting(
        STEP_SUMMARY_ENV, "set by GitHub Actions: `run` and `report` append the Markdown summary to it", parse=Path
    )
    host: HostSettings = nested(HostSettings)  # the local pool's sandbox: work copies, standing pool, mounts
    require_signed: bool = setting(
        ENV_REQUIRE,
        "retired and ignored: a registry is required by default; a run where it is set warns once",
        default=False,
        parse=bool,
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


def reference_tables() -> str:
    """The Markdown tables docs/reference/settings.md holds: the `gate` command's settings, then `gate-worker`'s."""
    from worker.celery.worker.settings import WorkerSettings

    return f"### `gate`\n\n{markdown(GateSettings)}\n### `gate-worker`\n\n{markdown(WorkerSettings)}"
