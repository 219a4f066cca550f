"""Enrolled workers: the coordinator's roster of worker keys, and what a signed batch result binds.

A worker signs, with its own Ed25519 key, one message per batch result:

    b"probegate/batch-result/v1\\x00"
    || len(batch_id)    as 8 bytes big-endian || batch_id      (UTF-8; the Celery task id the coordinator issued)
    || len(spec_digest) as 8 bytes big-endian || spec_digest   (ASCII hex: sha256 of the batch's canonical JSON)
    || len(obs_digest)  as 8 bytes big-endian || obs_digest    (ASCII hex: sha256 of the observations' exact JSON bytes)

The domain string keeps a result signature from ever being valid as any other probegate signature
(a card's DSSE envelope signs a different, PAE-encoded payload); the length prefixes make the split
into fields unambiguous. The coordinator rebuilds the message from its own records (the id it
issued, the digest of the batch it sent) and the bytes it received, so a signature verifies only
for the batch it was made for. Pure: signature checking itself is passed in (gate.io.keys does it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

RESULT_DOMAIN = b"probegate/batch-result/v1\x00"
_FROZEN = ConfigDict(frozen=True, extra="forbid")


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the one encoding both sides hash a batch spec in."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def spec_digest(batch: Mapping[str, Any]) -> str:
    """sha256 hex of a batch payload (worker.celery.shared.wire.encode_batch) in canonical JSON."""
    return hashlib.sha256(canonical_json(dict(batch))).hexdigest()


def observations_digest(observations: str) -> str:
    """sha256 hex of the observations exactly as they crossed the broker."""
    return hashlib.sha256(observations.encode()).hexdigest()


def result_message(batch_id: str, spec: str, observations: str) -> bytes:
    """The bytes a worker signs for one batch result (see the module docstring)."""
    parts = [batch_id.encode(), spec.encode(), observations_digest(observations).encode()]
    return RESULT_DOMAIN + b"".join(len(p).to_bytes(8, "big") + p for p in parts)


class ResultSignature(BaseModel):
    """What a worker attaches to a result: its key id, the batch id and spec digest it signed, the signature (hex)."""

    model_config = _FROZEN
    key_id: str
    batch_id: str
    spec_digest: str
    signature: str


class EnrolledWorker(BaseModel):
    """One enrolled key: the operator's name for the worker, its public key, and when it was revoked."""

    model_config = _FROZEN
    name: str
    key_id: str
    public_key: str  # SubjectPublicKeyInfo PEM, as `gate-worker key` prints it
    enrolled_at: datetime
    revoked_at: datetime | None = None
    acl_user: str | None = None  # the Redis ACL user made for it, when enrolment made one
    # The operator's own machine (`gate workers enrol --owned`): its results need no second run, and it runs
    # the cross-checks and replays of the others (docs/explanation/trust.md, "Owned workers").
    owned: bool = False

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class Roster(BaseModel):
    """Every key ever enrolled (revoked ones stay, so a revoked key is never mistaken for an unknown one)."""

    model_config = _FROZEN
    version: int = 1
    workers: tuple[EnrolledWorker, ...] = ()

    def by_key(self, key_id: str) -> EnrolledWorker | None:
        return next((w for w in self.workers if w.key_id == key_id), None)

    def owned(self) -> frozenset[str]:
        """The names of the active owned workers."""
        return frozenset(w.name for w in self.workers if w.active and w.owned)

    def by_name(self, name: str) -> EnrolledWorker | None:
        """The active worker of that name, else the latest revoked one."""
        named = [w for w in self.workers if w.name == name]
        return next((w for w in named if w.active), named[-1] if named else None)


class EnrolmentRefused(ValueError):
    """An enrol or revoke the roster does not allow; the message says why."""


def enrol(roster: Roster, worker: EnrolledWorker) -> Roster:
    """The roster with `worker` added; a key enrolled before (even revoked) or a name in use is refused."""
    if (known := roster.by_key(worker.key_id)) is not None:
        state = "enrolled" if known.active else "revoked"
        raise EnrolmentRefused(f"key {worker.key_id[:16]} is already {state} as {known.name!r}")
    if (named := roster.by_name(worker.name)) is not None and named.active:
        raise EnrolmentRefused(f"a worker named {worker.name!r} is enrolled already (revoke it first)")
    return roster.model_copy(update={"workers": (*roster.workers, worker)})


def revoke(roster: Roster, name: str, at: datetime) -> tuple[Roster, EnrolledWorker]:
    """The roster with the active worker `name` revoked at `at`, and that worker as it was."""
    found = roster.by_name(name)
    if found is None or not found.active:
        raise EnrolmentRefused(f"no enrolled worker named {name!r}")
    revoked = found.model_copy(update={"revoked_at": at})
    return roster.model_copy(update={"workers": tuple(revoked if w is found else w for w in roster.workers)}), found


class Refusal(StrEnum):
    """Why a batch result was not taken (each is a HarnessEvent kind)."""

    UNSIGNED = "unsigned_result"  # no signature, or one that does not parse
    UNKNOWN_KEY = "unknown_worker_key"  # signed by a key never enrolled
    REVOKED = "revoked_worker"  # signed by a key enrolled once and revoked since
    UNISSUED = "unissued_batch"  # signed for a batch id the coordinator never issued
    REPLAYED = "replayed_result"  # signed for another issued batch, or over a spec digest that is not the one sent
    FORGED = "forged_result"  # the signature does not verify over what the coordinator issued and received
    UNASSIGNED = "unassigned_signer"  # validly signed by an enrolled worker, but not the one the batch was assigned to


Verify = Callable[[str, bytes, bytes], bool]  # (public key PEM, signature, message) -> valid


def check_result(
    roster: Roster,
    issued: Mapping[str, str],
    batch_id: str,
    observations: str,
    claim: Any,
    verify: Verify,
) -> EnrolledWorker | tuple[Refusal, str]:
    """The enrolled worker that signed the result of `batch_id`, or (why refused, detail).

    `issued` maps every batch id this coordinator sent to the spec digest it sent; the message is
    rebuilt from those, never from the worker's claim, which only names what went wrong."""
    try:
        sig = ResultSignature.model_validate(claim)
        signature = bytes.fromhex(sig.signature)
    except ValueError:
        return Refusal.UNSIGNED, "the result carries no signature"
    worker = roster.by_key(sig.key_id)
    if worker is None:
        return Refusal.UNKNOWN_KEY, f"signed by key {sig.key_id[:16]}, which is not enrolled"
    if not worker.active:
        return Refusal.REVOKED, f"signed by {worker.name!r} (key {sig.key_id[:16]}), revoked {worker.revoked_at}"
    if batch_id not in issued or sig.batch_id != batch_id:
        if sig.batch_id not in issued:
            return Refusal.UNISSUED, f"{worker.name!r} signed batch {sig.batch_id[:36]!r}, never issued"
        return Refusal.REPLAYED, f"{worker.name!r} signed batch {sig.batch_id[:36]}, returned as {batch_id}"
    if sig.spec_digest != issued[batch_id]:
        return Refusal.REPLAYED, f"{worker.name!r} signed spec {sig.spec_digest[:16]}, sent {issued[batch_id][:16]}"
    if not verify(worker.public_key, signature, result_message(batch_id, issued[batch_id], observations)):
        return Refusal.FORGED, f"signature under {worker.name!r}'s key does not verify over this batch's result"
    return worker


def check_assigned(
    roster: Roster, assigned_key: str | None, signer: EnrolledWorker
) -> EnrolledWorker | tuple[Refusal, str]:
    """`signer` when it holds the key the batch was assigned to (or none was), else why refused, naming both.

    A valid signature proves who answered, not that they were asked: another enrolled worker that took
    the batch off its assignee's queue, or overwrote its result, must not choose its own share."""
    if assigned_key is None or signer.key_id == assigned_key:
        return signer
    meant = roster.by_key(assigned_key)
    named = meant.name if meant is not None else f"key {assigned_key[:16]}"
    return Refusal.UNASSIGNED, f"signed by {signer.name!r}, but the batch was assigned to {named!r}"
