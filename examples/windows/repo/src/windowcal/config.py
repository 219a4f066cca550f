"""Reading a schedule file: YAML in, a checked dict out. Unknown keys are errors, not ignored."""

from __future__ import annotations

from typing import Any

import yaml

KEYS = {"service", "timezone", "rrule", "start", "duration_minutes", "retry"}
REQUIRED = {"service", "timezone", "rrule", "start"}


class ConfigError(ValueError):
    """The schedule is not valid; `field` names the offending key."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def load(text: str) -> dict[str, Any]:
    """Parse and check one schedule document."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError("document", f"not valid YAML: {exc.__class__.__name__}") from None
    if not isinstance(data, dict):
        raise ConfigError("document", "must be a mapping")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ConfigError(unknown[0], "unknown key")
    missing = sorted(REQUIRED - set(data))
    if missing:
        raise ConfigError(missing[0], "required")
    if not isinstance(data.get("duration_minutes", 60), int):
        raise ConfigError("duration_minutes", "must be an integer")
    return data
