"""The signature envelope beside a card: `<card file name>.dsse.json` (for `verdict-card.json`,
`verdict-card.json.dsse.json`), a DSSE JSON envelope whose payload is the in-toto Statement of
gate.core.card.signedcard. Written by `gate sign` and `gate run --sign-key`, read by `accept` and `refold`.
"""

from __future__ import annotations

from pathlib import Path

from gate.core.card.card import VerdictCard
from gate.core.card.dsse import Envelope, EnvelopeError, Signer, Verifier
from gate.core.card.signedcard import sign_card, signature_problem
from gate.core.errors import GateError, InputMissingError, UsageError
from gate.io.artifacts import parse_card, write_output
from gate.io.evidence import stored_records
from gate.io.inputs import read_input
from gate.io.keys import SigningKey, load_signing_key
from gate.io.patchedtree import PatchedTree
from gate.io.snapshot import check_outside_tree
from gate.io.treeselect import TreeSelection

SUFFIX = ".dsse.json"


class _NoEnvelope(InputMissingError):
    """No envelope beside the card."""


def envelope_path(card: Path) -> Path:
    """Where the envelope of the card at `card` is written: beside it, `.dsse.json` appended."""
    return card.with_name(card.name + SUFFIX)


def write_signature(card_path: Path, card: VerdictCard, data: bytes, signer: Signer) -> Path:
    """Sign the card file's bytes `data` (parsed: `card`) and write the envelope beside it."""
    target = envelope_path(card_path)
    write_output(target, sign_card(card, data, signer).to_json(), "card signature")
    return target


def drop_stale_signature(card_path: Path) -> None:
    """Remove an envelope left beside the card by an earlier signed run: it signs another card."""
    where = envelope_path(card_path)
    try:
        where.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot remove the old card signature: {exc.strerror}", file=str(where)) from None


def sign_card_file(card_path: Path, signer: Signer) -> Path:
    """`gate sign`: read the card file as it is (it must be a card, and the evidence store beside it, if
    any, must make its `evidence` digest), sign its bytes, write the envelope."""
    data = read_input(card_path, "verdict card")
    card = parse_card(data, card_path)
    stored_records(card, card_path)  # a store that does not check out is refused, never signed over
    return write_signature(card_path, card, data, signer)


def run_signing_key(
    path: Path, workdir: Path, tree: PatchedTree, selection: TreeSelection, *, card: Path
) -> SigningKey:
    """`gate run --sign-key`: the key, read before any container starts. A key the patched tree would
    carry into every sandbox is refused (the probe could read it and sign cards of its own), and so is
    an envelope path inside the tree that the suite does not leave out of its digest."""
    key = load_signing_key(path)
    try:
        rel = path.resolve().relative_to(workdir.resolve()).as_posix()
    except ValueError:
        rel = None
    if rel is not None and (rel in tree.files or rel in tree.links):
        raise UsageError(
            f"the private key lies in the patched tree ({rel}), which every sandbox gets a copy of; "
            "keep it outside the tree",
            file=str(path),
            field="--sign-key",
        )
    check_outside_tree(envelope_path(card), workdir, selection, field="--sign-key")
    return key


def signature_reason(
    card_path: Path,
    card: VerdictCard,
    data: bytes,
    key: Verifier,
    *,
    tree_digest: str,
    base_commit: str | None,
) -> str | None:
    """Why the card file `data` at `card_path` is not proven by the envelope beside it under `key`
    (unsigned, unreadable envelope, or gate.core.card.signedcard's reasons), or None when it is."""
    where = envelope_path(card_path)
    try:
        # A card named so long that no envelope can sit beside it reads as unsigned, not as a crash.
        data_in = read_input(where, "card signature", missing_error=_NoEnvelope)
        envelope = Envelope.from_json(data_in)
    except _NoEnvelope:
        return f"the card is unsigned: no signature envelope at {where}"
    except EnvelopeError as exc:
        return f"unreadable card signature {where}: {exc.message}"
    except GateError as exc:
        return f"unreadable card signature: {exc}"
    return signature_problem(envelope, card, data, key, tree_digest=tree_digest, base_commit=base_commit)
