"""The worker's signing key and the signature each batch result carries (gate.core.trust.enrolment says
exactly what is signed). The key is this worker's own: created at its first start, kept 0600 in
the worker's home (or $PROBEGATE_WORKER_KEY), never mounted into a sandbox; the operator enrols
its public half with the coordinator (`gate-worker key`, then `gate workers enrol`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gate.core.trust.enrolment import ResultSignature, result_message, spec_digest
from gate.io.keys import SigningKey, load_or_create
from worker.celery.worker.settings import ENV_KEY, current

__all__ = ["ENV_KEY", "key_path", "sign_result", "worker_key"]

_key: SigningKey | None = None


def key_path() -> Path:
    """$PROBEGATE_WORKER_KEY, else ~/.config/probegate/worker.key."""
    return current().key


def worker_key() -> SigningKey:
    """This worker's key, created on first use; loaded once per process."""
    global _key
    if _key is None:
        _key = load_or_create(key_path())
    return _key


def sign_result(batch_id: str, batch: dict[str, Any], observations: str) -> dict[str, str]:
    """The signature over (batch id, digest of the batch as received, observations) to return beside them."""
    key = worker_key()
    digest = spec_digest(batch)
    signature = key.sign(result_message(batch_id, digest, observations))
    return ResultSignature(
        key_id=key.key_id, batch_id=batch_id, spec_digest=digest, signature=signature.hex()
    ).model_dump()
