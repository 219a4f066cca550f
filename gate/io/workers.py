"""The worker registry on the coordinator's disk: a JSON file of enrolled keys (gate.core.trust.enrolment).

It lives with the books, on the coordinator (default `.probegate/workers.json`, or the file
$PROBEGATE_WORKERS names), never in the broker: nothing a worker's broker credential reaches can
enrol a key or un-revoke one. Written whole and atomically; a missing file is an empty roster only
where the caller says so (enrolling the first worker), never when results are being checked.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout
from pydantic import ValidationError

from gate.core.errors import ConfigError, InputMissingError, UsageError
from gate.core.trust.enrolment import Roster
from gate.io.artifacts import check_writable, write_output
from gate.io.inputs import read_input, reason
from gate.io.keys import KeyFileError, VerifyKey


class RegistryFileError(ConfigError):
    """A worker registry file that does not parse; `file` names it."""


def load_roster(path: Path, *, missing_ok: bool = False) -> Roster:
    """The roster in `path`; a missing file is an empty roster only with `missing_ok`. Read through
    the one reader that never blocks: a FIFO or a directory named as the registry is refused."""
    try:
        data = read_input(path, "worker registry", missing_error=_Missing)
    except _Missing:
        if missing_ok:
            return Roster()
        raise InputMissingError("worker registry not found", file=str(path)) from None
    try:
        return Roster.model_validate_json(data)
    except ValidationError as exc:
        where = ".".join(str(p) for p in exc.errors()[0]["loc"]) or "(top)"
        raise RegistryFileError(
            f"not a worker registry: {exc.errors()[0]['msg']}", file=str(path), field=where
        ) from None


class _Missing(InputMissingError):
    """No registry file at the path (its absence may mean an empty roster)."""


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def check_registry_writable(path: Path, field: str = "--workers") -> None:
    """Refuse, before the lock file is made, a registry path the gate could not write: a folder that
    cannot be created (under a regular file), a name too long for the registry or its lock."""
    check_writable(path, field)
    check_writable(lock_path(path), field)


@contextlib.contextmanager
def locked(path: Path, timeout_s: float = 30.0) -> Iterator[None]:
    """Hold `<registry>.lock` for one read-change-write, so two enrolments at once both land."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(lock_path(path)), timeout=timeout_s)
        lock.acquire()
    except Timeout:
        raise RegistryFileError(f"the worker registry stayed locked for {timeout_s:.0f} s", file=str(path)) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot lock the worker registry: {reason(exc)}", file=str(path)) from None
    try:
        yield
    finally:
        lock.release()


def save_roster(path: Path, roster: Roster) -> None:
    """Replace the registry file in one rename (mode 0644: public keys only, nothing secret)."""
    write_output(path, roster.model_dump_json(indent=2).encode() + b"\n", "worker registry")


def verify_pem(public_pem: str, signature: bytes, message: bytes) -> bool:
    """gate.core.trust.enrolment's Verify over a registry entry's PEM; a garbled entry verifies nothing."""
    key = _parsed(public_pem)
    return key is not None and key.verify(signature, message)


@functools.lru_cache(maxsize=256)
def _parsed(public_pem: str) -> VerifyKey | None:
    # Parsed once per key, not once per batch: a run checks every result against a handful of keys.
    try:
        return VerifyKey.from_pem(public_pem.encode())
    except KeyFileError:
        return None
