"""The evidence store beside a card: `<card folder>/evidence/<sha256>.json`, one trial record per file,
named by the sha256 of its canonical bytes (`gate.core.card.evidence`). Runs writing cards into the same
folder share the store; a card's records are those whose observation carries its run id.
"""

from __future__ import annotations

import hashlib
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord, evidence_digest, record_bytes, record_digest
from gate.core.errors import ConfigError, UsageError
from gate.io.artifacts import write_output
from gate.io.inputs import read_input, reason

FOLDER = "evidence"
_NAME = re.compile(r"[0-9a-f]{64}\.json")


def evidence_dir(card: Path) -> Path:
    """Where the records of the card at `card` are kept."""
    return card.parent / FOLDER


def check_store(folder: Path, field: str) -> None:
    """Refuse, before anything runs, a store path that is there but is not a folder."""
    try:
        if folder.exists() and not folder.is_dir():
            raise UsageError("the evidence store is not a directory", file=str(folder), field=field)
    except OSError as exc:
        raise UsageError(f"cannot use the evidence store: {reason(exc)}", file=str(folder), field=field) from None


def write_evidence(folder: Path, records: Sequence[TrialRecord]) -> str:
    """Write each record (atomically) under its digest; returns the digest the card binds."""
    digests = []
    for record in records:
        digest = record_digest(record)
        write_output(folder / f"{digest}.json", record_bytes(record), "evidence record")
        digests.append(digest)
    return evidence_digest(digests)


def read_evidence(folder: Path, run_id: str) -> dict[str, TrialRecord]:
    """Every record of run `run_id` in the store, by file name. Any file whose name is not the sha256
    of its bytes, or that is not a record, is refused (ConfigError naming it) whichever run it is of.
    Dot files are the leftovers of interrupted atomic writes and are skipped."""
    found: dict[str, TrialRecord] = {}
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except FileNotFoundError:
        return found
    except OSError as exc:
        raise ConfigError(f"cannot read the evidence store: {reason(exc)}", file=str(folder)) from None
    for path in entries:
        try:
            if not stat.S_ISREG(path.lstat().st_mode) or not _NAME.fullmatch(path.name):
                raise ConfigError("not an evidence record (<sha256>.json, a regular file)", file=str(path))
            data = read_input(path, "evidence record")  # never blocks, were it swapped for a FIFO
        except OSError as exc:
            raise ConfigError(f"unreadable evidence record: {reason(exc)}", file=str(path)) from None
        digest = hashlib.sha256(data).hexdigest()
        if f"{digest}.json" != path.name:
            raise ConfigError(f"tampered evidence record: its content's sha256 is {digest}", file=str(path))
        try:
            record = TrialRecord.model_validate_json(data)
        except ValidationError as exc:
            raise ConfigError(f"malformed evidence record: {exc.errors()[0]['msg']}", file=str(path)) from None
        if record.observation.run_id == run_id:
            found[path.name] = record
    return found


def verified_records(card: VerdictCard, card_path: Path) -> list[TrialRecord]:
    """The card's records, once every file checks out and their set's digest equals the card's
    `evidence`; else a ConfigError naming the file (or the trial with no record)."""
    return list(verified_evidence(card, card_path).values())


def verified_evidence(card: VerdictCard, card_path: Path) -> dict[str, TrialRecord]:
    """`verified_records` by digest, the name each has in the store (`evidence/<digest>.json`)."""
    folder = evidence_dir(card_path)
    if card.evidence is None:
        raise ConfigError("the card binds no evidence (made before evidence was kept)", file=str(card_path))
    found = read_evidence(folder, card.run_id)
    if evidence_digest(p.removesuffix(".json") for p in found) != card.evidence:
        raise ConfigError(_mismatch(card, found), file=str(folder))
    return {name.removesuffix(".json"): record for name, record in found.items()}


def stored_records(card: VerdictCard, card_path: Path) -> list[TrialRecord]:
    """`verified_records` when the card binds evidence and its store is beside it; else no record (a card
    made before evidence was kept, or copied without its store). A store that does not check out is refused."""
    folder = evidence_dir(card_path)
    try:
        present = folder.is_dir()
    except OSError as exc:
        raise ConfigError(f"cannot read the evidence store: {reason(exc)}", file=str(folder)) from None
    if card.evidence is None or not present:
        return []
    return verified_records(card, card_path)


def _mismatch(card: VerdictCard, found: dict[str, TrialRecord]) -> str:
    """Why the records do not make the card's evidence digest: the first trial with no record, or
    the first record the card's rows do not account for, when either can be named."""
    expected = {(row.id, i) for row in card.properties for i in range(row.trials)}
    seen: set[tuple[str, int]] = set()
    for name, record in found.items():
        key = (record.property_id, record.trial_index)
        if key not in expected or key in seen:
            return f"record {name} ({key[0]} trial {key[1]}) is not one the card binds"
        seen.add(key)
    missing = sorted(expected - seen)
    if missing:
        pid, index = missing[0]
        return f"no record of {pid} trial {index} ({len(missing)} missing); the card's evidence digest does not match"
    return f"the {len(found)} records do not make the card's evidence digest {card.evidence}"
