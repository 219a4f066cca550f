"""`gate refold CARD`: check a card against the evidence store beside it. Every record's name must
be the sha256 of its bytes and the records' digest the card's `evidence`; then each property's
outcomes are folded again with the row's band and rule, and kind, trials and hits compared. With
`--key`, the card's signature envelope must prove the card file first (gate.io.cardsig).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.core.errors import RET_BLOCKED, RET_OK
from gate.core.escaping import one_line

_EPILOG = (
    "With --key PUBLIC_KEY the card's signature envelope (CARD.dsse.json) must prove the card file under "
    "that key first, so the evidence digest the records are checked against is the signed one. "
    "Exit 0: every row agrees with its records; 1: a row differs (named), or with --key the card is "
    "unsigned or its signature does not hold (the reason named); 65: a record is tampered, missing or "
    "extra, or the card binds no evidence (the file named); 66: the card or the key is missing."
)


def add_refold_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `refold` to the `gate` command's subparsers."""
    parser = subparsers.add_parser(
        "refold", help="re-fold a card's kept trial records and compare them with its rows", epilog=_EPILOG
    )
    parser.set_defaults(handler="gate.cli.refold:refold_command")
    parser.add_argument("card", type=Path, metavar="CARD", help="the verdict card (its records: evidence/ beside it)")
    parser.add_argument(
        "--key", type=Path, metavar="PUBLIC_KEY", help="also require the card's signature by this public key"
    )
    return parser


def refold_command(args: argparse.Namespace) -> int:
    """`gate refold CARD [--key]`."""
    return run_refold(args.card, key=args.key)


def run_refold(card_path: Path, *, key: Path | None = None) -> int:
    """Print one line per property; 0 when every row agrees with its records, else 1. With `key`, a
    card whose signature does not hold is refused first (one line, 1)."""
    from gate.core.card.evidence import refold
    from gate.io.artifacts import parse_card
    from gate.io.cardsig import signature_reason
    from gate.io.evidence import verified_records
    from gate.io.inputs import read_input
    from gate.io.keys import load_verify_key

    trusted = load_verify_key(key) if key is not None else None
    data = read_input(card_path, "verdict card")
    card = parse_card(data, card_path)
    if trusted is not None:
        # No tree to recompute here: the signed tree and base must be the card's own.
        why = signature_reason(card_path, card, data, trusted, tree_digest=card.tree_digest, base_commit=card.base_rev)
        if why is not None:
            print(one_line(f"signature: REFUSED: {why}"))
            return RET_BLOCKED
        print(f"signature: verified by key {trusted.key_id}")
    result = refold(card, verified_records(card, card_path))
    for line in result.lines():
        print(one_line(line))
    return RET_OK if result.agrees else RET_BLOCKED
