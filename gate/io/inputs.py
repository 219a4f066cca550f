"""The one way every reader opens a file the user named (suite, clock, seal, freeze file, ledger,
calibration, card): each OS, decoding or parse failure becomes one GateError naming the file, and
nothing ever blocks on a FIFO.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from gate.core.errors import ConfigError, GateError, InputMissingError


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
        raise InputMissingError(f"cannot read the {what}: {reason(exc)}", file=str(path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputMissingError(f"{what} is a directory, not a file", file=str(path))
        if not stat.S_ISREG(mode):
            raise InputMissingError(f"{what} is not a regular file", file=str(path))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as exc:
        raise InputMissingError(f"cannot read the {what}: {reason(exc)}", file=str(path)) from None
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


def reason(exc: BaseException) -> str:
    """An OS or path error in a few words (its strerror), for a one-line message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, ValueError) and "null" in str(exc):
        return "the path holds a NUL byte"
    return str(exc) or type(exc).__name__
