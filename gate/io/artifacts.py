"""Files the gate writes and reads back: written atomically (temp file, fsync, rename), so a
reader sees the old file or the new one, never half of one; output paths are checked before
anything runs. Reading what the user named is `gate.io.inputs`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from gate.core.card.card import VerdictCard
from gate.core.errors import ConfigError, UsageError
from gate.io.inputs import read_input, reason


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


def write_output(path: Path, data: bytes, what: str) -> None:
    """`write_atomic` for a file the user named: a failure is one UsageError naming the file."""
    try:
        write_atomic(path, data)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write the {what}: {reason(exc)}", file=str(path)) from None


def append_output(path: Path, data: bytes, what: str) -> None:
    """Append `data` to a file the user named (created when missing), as CI step summaries are meant
    to be written; a failure is one UsageError naming the file."""
    try:
        with path.open("ab") as handle:
            handle.write(data)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot append the {what}: {reason(exc)}", file=str(path)) from None


def check_writable(path: Path, field: str) -> None:
    """Refuse, before anything runs, an output path the gate could not replace at the end:
    a directory, a special file, or a folder that cannot be created or written."""
    try:
        if path.is_dir():
            raise UsageError("is a directory; name a file", file=str(path), field=field)
        if path.exists() and not path.is_file():
            raise UsageError("is not a regular file", file=str(path), field=field)
        folder = path.absolute().parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # write_atomic creates the missing folders below the nearest existing one
        if not folder.is_dir():
            raise UsageError(f"cannot create a folder under {folder}: not a directory", file=str(path), field=field)
        # Only creating (and renaming) in the folder matters: write_atomic never opens `path` itself.
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write here: {reason(exc)}", file=str(path), field=field) from None


def card_bytes(card: VerdictCard) -> bytes:
    """The card file's bytes, as `write_card` writes them (and `gate sign` signs them)."""
    return (card.model_dump_json(indent=2) + "\n").encode("utf-8")


def write_card(path: Path, card: VerdictCard) -> None:
    write_output(path, card_bytes(card), "verdict card")


def read_card(path: Path) -> VerdictCard:
    """Load a card; a missing or unreadable card raises (and `accept` treats it as a failed gate)."""
    return parse_card(read_input(path, "verdict card"), path)


def parse_card(data: bytes, path: Path) -> VerdictCard:
    """A card from the bytes read from `path`; malformed is a ConfigError naming the file and field."""
    try:
        return VerdictCard.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or str(first.get("ctx", {}).get("where", ""))
        # A check over the whole card (its numbers) names the field in its own message.
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"unreadable verdict card: {message}", file=str(path), field=where or None) from None
