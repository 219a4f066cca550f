"""Settings read from the environment, declared once: each field of a settings dataclass names its variable,
its meaning and how its text is parsed, so reading, `gate doctor --json` and the docs' table share one source."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gate.core.errors import UsageError


def setting(
    variable: str,
    meaning: str,
    *,
    default: Any = None,
    default_factory: Callable[[], Any] | None = None,
    parse: Callable[[str], Any] = str,
    shown: str | None = None,
) -> Any:
    """A settings field read from `variable` (empty or unset: the default). `shown`: the default as the docs
    write it, when its value depends on the machine (a home folder)."""
    metadata = {"variable": variable, "meaning": meaning, "parse": parse, "shown": shown}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def nested(cls: type[Any]) -> Any:
    """A field holding another settings dataclass, read from the same environment."""
    return dataclasses.field(default_factory=cls, metadata={"nested": cls})


def seconds(text: str) -> float:
    """A positive number of seconds."""
    value = float(text)
    if not value > 0:
        raise ValueError("must be a positive number of seconds")
    return value


def default_state_dir() -> Path:
    """The coordinator's state folder when neither $PROBEGATE_STATE_DIR nor $XDG_STATE_HOME names one."""
    return Path.home() / ".local" / "state" / "probegate"


def read(cls: type[Any], env: Mapping[str, str], **given: Any) -> Any:
    """An instance of the settings dataclass `cls` from `env`; `given` fields are taken as they are. A value
    that does not parse is a usage error naming its variable."""
    values: dict[str, Any] = dict(given)
    for field in dataclasses.fields(cls):
        variable = field.metadata.get("variable")
        text = env.get(variable, "") if variable else ""
        if field.name not in values and "nested" in field.metadata:
            values[field.name] = read(field.metadata["nested"], env)
        if field.name in values or not text:
            continue
        try:
            values[field.name] = field.metadata["parse"](text)
        except ValueError as exc:
            raise UsageError(f"{text!r} does not parse: {exc}", field=variable) from None
    return cls(**values)


def rows(cls: type[Any], current: Any = None) -> list[dict[str, Any]]:
    """One row per setting of `cls`: its variable, its default as the docs write it, and its meaning; with
    `current` (an instance), whether it is set away from its default (never the value: it may hold a password)."""
    found: list[dict[str, Any]] = []
    defaults = cls()
    for field in dataclasses.fields(cls):
        if "nested" in field.metadata:
            inner = getattr(current, field.name) if current is not None else None
            known = {row["variable"] for row in found}
            found += [row for row in rows(field.metadata["nested"], inner) if row["variable"] not in known]
        if "variable" not in field.metadata or field.metadata["variable"] in {row["variable"] for row in found}:
            continue
        row = {"variable": field.metadata["variable"], "default": _shown(field), "meaning": field.metadata["meaning"]}
        if current is not None:
            row["set"] = getattr(current, field.name) != getattr(defaults, field.name)
        found.append(row)
    return found


def markdown(cls: type[Any]) -> str:
    """The settings of `cls` as a Markdown table."""
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for row in rows(cls):
        default = f"`{row['default']}`" if row["default"] else "(none)"
        lines.append(f"| `{row['variable']}` | {default} | {row['meaning']} |")
    return "\n".join(lines) + "\n"


def _shown(field: dataclasses.Field[Any]) -> str:
    if field.metadata.get("shown") is not None:
        return str(field.metadata["shown"])
    if field.default is dataclasses.MISSING or field.default is None or field.default is False:
        return ""
    return str(field.default)
