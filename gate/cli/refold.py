"""`gate refold CARD`: check a card against the evidence store beside it. Every record's name must
be the sha256 of its bytes and the records' digest the card's `evidence`; then each property's
outcomes are folded again with the row's band and rule, and kind, trials and hits compared.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.core.errors import RET_BLOCKED, RET_OK, one_line
from gate.core.evidence import refold
from gate.io.artifacts import read_card
from gate.io.evidence import verified_records

_EPILOG = (
    "Exit 0: every row agrees with its records; 1: a row differs (named); 65: a record is tampered, "
    "missing or extra, or the card binds no evidence (the file named); 66: the card is missing."
)


def add_refold_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `refold` to the `gate` command's subparsers."""
    parser = subparsers.add_parser(
        "refold", help="re-fold a card's kept trial records and compare them with its rows", epilog=_EPILOG
    )
    parser.add_argument("card", type=Path, metavar="CARD", help="the verdict card (its records: evidence/ beside it)")
    return parser


def run_refold(card_path: Path) -> int:
    """Print one line per property; 0 when every row agrees with its records, else 1."""
    card = read_card(card_path)
    result = refold(card, verified_records(card, card_path))
    for line in result.lines():
        print(one_line(line))
    return RET_OK if result.agrees else RET_BLOCKED
