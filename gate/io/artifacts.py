"""Files the gate writes and reads back: written atomically (temp file, fsync, rename), so a
reader sees the old file or the new one, never half of one. Also the one way every reader opens
a file the user named, so each OS or parse failure becomes one GateError naming the file.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from pathlib import Path

from pydantic import ValidationError

from gate.core.card import VerdictCard
from gate.core.errors import ConfigError, GateError, InputMissingError, UsageError


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
        raise UsageError(f"cannot write the {what}: {_reason(exc)}", file=str(path)) from None


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
        raise UsageError(f"cannot write here: {_reason(exc)}", file=str(path), field=field) from None


def write_card(path: Path, card: VerdictCard) -> None:
    write_output(path, (card.model_dump_json(indent=2) + "\n").encode("utf-8"), "verdict card")


def read_card(path: Path) -> VerdictCard:
    """Load a card; a missing or unreadable card raises (and `accept` treats it as a failed gate)."""
    data = read_input(path, "verdict card")
    try:
        return VerdictCard.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "card"
        raise ConfigError(f"unreadable verdict card: {where}: {first['msg']}", file=str(path)) from None


def read_input(
    path: Path,
    what: str,
    *,
    missing: str | None = None,
    missing_error: type[GateError] = InputMissingError,
) -> bytes:
    """The bytes of a regular file the user named. Missing: `missing_error(missing)`; a directory,
    FIFO or device (never blocks on a FIFO), or unreadable: InputMissingError; a NUL: ConfigError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise missing_error(missing or f"{what} not found", file=str(path)) from None
    except ValueError:
        raise ConfigError(f"{what}: the path holds a NUL byte", file=str(path)) from None
    except OSError as exc:
        raise InputMissingError(f"cannot read the {what}: {_reason(exc)}", file=str(path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputMissingError(f"{what} is a directory, not a file", file=str(path))
        if not stat.S_ISREG(mode):
            raise InputMissingError(f"{what} is not a regular file", file=str(path))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as exc:
        raise InputMissingError(f"cannot read the {what}: {_reason(exc)}", file=str(path)) from None
    finally:
        os.close(fd)


def decode_text(data: bytes, path: Path | str, what: str) -> str:
    """UTF-8 text of a file the user wrote (`path` may also name a Redis key); anything else is a
    ConfigError naming the offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 (bad byte at offset {exc.start})", file=str(path)) from None


def parse_problem(exc: Exception) -> str:
    """What a JSON or TOML parser's failure means, in one line for the user."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "integer string conversion" in str(exc):  # int() refuses past sys.get_int_max_str_digits()
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def parse_json(data: bytes, path: Path | str, what: str) -> object:
    """Parse JSON bytes the user wrote; errors name the file and the line."""
    text = decode_text(data, path, what)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{what} is not valid JSON: {parse_problem(exc)}", file=str(path)) from None


def read_json(path: Path, what: str, *, missing: str | None = None) -> object:
    """Read and parse a JSON file the user wrote; every failure is one GateError naming the file."""
    return parse_json(read_input(path, what, missing=missing), path, what)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, ValueError) and "null" in str(exc):
        return "the path holds a NUL byte"
    return str(exc) or type(exc).__name__
