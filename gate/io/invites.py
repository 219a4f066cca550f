"""The invite book on the coordinator's disk: `invites.json` beside the worker registry (gate.core.trust.invites).

It holds each invite's secret hash, never a secret; written whole and atomically with mode 0600, and changed
under the registry's lock (gate.io.workers.locked), so an admission that enrols a worker and spends the
invite's use does both or neither against any other `gate workers` command.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from gate.core.errors import ConfigError, InputMissingError
from gate.core.trust.invites import InviteBook
from gate.io.artifacts import write_output
from gate.io.inputs import read_input


class InviteFileError(ConfigError):
    """An invite book that does not parse; `file` names it."""


def invites_path(registry: Path) -> Path:
    """The invite book of the worker registry at `registry`."""
    return registry.with_name("invites.json")


def load_invites(path: Path) -> InviteBook:
    """The book at `path`; a missing one is empty (no invite was ever made)."""
    try:
        data = read_input(path, "invite book", missing_error=_Missing)
    except _Missing:
        return InviteBook()
    try:
        return InviteBook.model_validate_json(data)
    except ValidationError as exc:
        where = ".".join(str(p) for p in exc.errors()[0]["loc"]) or "(top)"
        raise InviteFileError(f"not an invite book: {exc.errors()[0]['msg']}", file=str(path), field=where) from None


class _Missing(InputMissingError):
    """No invite book at the path: no invite was made (a folder or FIFO there is still refused)."""


def save_invites(path: Path, book: InviteBook) -> None:
    """Replace the book in one rename (mode 0600: secret hashes)."""
    write_output(path, book.model_dump_json(indent=2).encode() + b"\n", "invite book")
