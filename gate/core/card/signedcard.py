"""Signed cards: a verdict card as the predicate of an in-toto Statement in a DSSE envelope, and the
check `accept` and `refold` make of one. Pure; the envelope file beside the card is gate.io.cardsig's.

The Statement's subjects (each found by its name; two subjects of one name are refused):

    base   {"gitCommit": <the base commit>}        only when the run had --base
    tree   {"probegateTree": <the card's tree_digest>}  probegate's digest of the patched tree
    card   {"sha256": <sha256 of the card file's bytes>}

and its predicate (type `PREDICATE_TYPE`) is the card's JSON object. The card's `evidence` (the
digest over every trial record kept beside it) is in the predicate, so the signature covers it.
"""

from __future__ import annotations

import hashlib
import json

from gate.core.card.card import CARD_SCHEMA_VERSION, VerdictCard
from gate.core.card.dsse import (
    INTOTO_PAYLOAD_TYPE,
    Envelope,
    EnvelopeError,
    ResourceDescriptor,
    Signer,
    Statement,
    Verifier,
    sign,
    verify,
)

# A name, not a location: nothing is served there. The version follows the card's schema version.
PREDICATE_TYPE = f"urn:probegate:verdict-card:v{CARD_SCHEMA_VERSION}"
BASE, TREE, CARD = "base", "tree", "card"
GIT_COMMIT, TREE_DIGEST, SHA256 = "gitCommit", "probegateTree", "sha256"


def card_statement(card: VerdictCard, card_bytes: bytes) -> Statement:
    """The Statement a signer makes of the card file `card_bytes` (`card`, parsed from them)."""
    subjects = [ResourceDescriptor(name=BASE, digest={GIT_COMMIT: card.base_rev})] if card.base_rev else []
    subjects += [
        ResourceDescriptor(name=TREE, digest={TREE_DIGEST: card.tree_digest}),
        ResourceDescriptor(name=CARD, digest={SHA256: hashlib.sha256(card_bytes).hexdigest()}),
    ]
    return Statement(subject=tuple(subjects), predicate_type=PREDICATE_TYPE, predicate=json.loads(card_bytes))


def sign_card(card: VerdictCard, card_bytes: bytes, signer: Signer) -> Envelope:
    """The envelope that signs the card file `card_bytes`."""
    return sign(INTOTO_PAYLOAD_TYPE, card_statement(card, card_bytes).to_bytes(), signer)


def signature_problem(
    envelope: Envelope,
    card: VerdictCard,
    card_bytes: bytes,
    key: Verifier,
    *,
    tree_digest: str,
    base_commit: str | None,
) -> str | None:
    """Why `envelope` does not prove the card file `card_bytes` for the tree `tree_digest` and the base
    `base_commit` under `key`, or None when it does. Checked in order, the first problem named:
    payload type, signature, statement, tree, base, evidence, then every byte of the card."""
    if envelope.payload_type != INTOTO_PAYLOAD_TYPE:
        return f"the card's envelope has payloadType {envelope.payload_type!r}, not {INTOTO_PAYLOAD_TYPE!r}"
    try:
        body = verify(envelope, [key], payload_types=[INTOTO_PAYLOAD_TYPE])
    except EnvelopeError as exc:
        return f"the card is not signed by the trusted key {key.key_id[:16]}: {exc.message}"
    try:
        statement = Statement.from_bytes(body)
    except EnvelopeError as exc:
        return f"the signed payload is {exc.message}"
    if statement.predicate_type != PREDICATE_TYPE:
        return f"the signed predicateType is {statement.predicate_type!r}, not {PREDICATE_TYPE!r}"
    signed_tree = statement.digest(TREE, TREE_DIGEST)
    if signed_tree != tree_digest:
        return f"the signature is for tree {_short(signed_tree)}, not this one ({tree_digest[:16]})"
    signed_base = statement.digest(BASE, GIT_COMMIT)
    if signed_base != base_commit:
        return f"the signature is for base {_short(signed_base)}, not {_short(base_commit)}"
    signed_evidence = statement.predicate.get("evidence")
    if signed_evidence != card.evidence:
        return f"the card's evidence digest {_short(card.evidence)} is not the signed one ({_short(signed_evidence)})"
    if statement.digest(CARD, SHA256) != hashlib.sha256(card_bytes).hexdigest():
        return "the card file is not the signed card: its bytes changed after signing"
    if statement.predicate != json.loads(card_bytes):
        return "the signed predicate is not the card file's content"
    return None


def _short(value: object) -> str:
    return value[:16] if isinstance(value, str) else "none"
