"""What the `gate` command takes from its environment, read once by the entry point (gate.cli.main) and
handed down on the parsed arguments (`args.settings`): nothing below it reads these variables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

INTERPRETER_ENV = "PROBEGATE_INTERPRETER"
# gate.io.workers.ENV_REQUIRE (deprecated), written out: that module loads the enrolment's crypto, which a
# local run never needs.
ENV_REQUIRE = "PROBEGATE_REQUIRE_SIGNED"


@dataclass(frozen=True)
class GateSettings:
    """The defaults `run`, `baseline` and `flakes explain` take from the environment under their flags."""

    interpreter: str | None = None  # $PROBEGATE_INTERPRETER: under --interpreter
    registry: str | None = None  # $PROBEGATE_REGISTRY: under --registry
    queue: str | None = None  # $PROBEGATE_QUEUE: under --queue
    require_signed: bool = False  # $PROBEGATE_REQUIRE_SIGNED: deprecated, warned about and ignored

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GateSettings:
        return cls(
            interpreter=env.get(INTERPRETER_ENV) or None,
            registry=env.get("PROBEGATE_REGISTRY") or None,
            queue=env.get("PROBEGATE_QUEUE") or None,
            require_signed=bool(env.get(ENV_REQUIRE)),
        )


def settings_of(args: object) -> GateSettings:
    """The settings the entry point put on `args` (none there: the defaults, nothing from the environment)."""
    found = getattr(args, "settings", None)
    return found if isinstance(found, GateSettings) else GateSettings()
