"""Files the gate writes and reads back: written atomically (temp file, fsync, rename), so a
reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from gate.core.card import VerdictCard
from gate.core.errors import ConfigError, InputMissingError


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one rename; the directory is created when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_card(path: Path, card: VerdictCard) -> None:
    write_atomic(path, (card.model_dump_json(indent=2) + "\n").encode("utf-8"))


def read_card(path: Path) -> VerdictCard:
    """Load a card; a missing or unreadable card raises (and `accept` treats it as a failed gate)."""
    if not path.is_file():
        raise InputMissingError("verdict card not found", file=str(path))
    try:
        return VerdictCard.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "card"
        raise ConfigError(f"unreadable verdict card: {where}: {first['msg']}", file=str(path)) from None


def read_json(path: Path, what: str) -> object:
    """Parse a JSON file the user wrote; errors name the file and the line."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}", file=str(path)) from None
