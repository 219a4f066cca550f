"""`gate diff CARD_A CARD_B`: what changed between two verdict cards, as escaped text or as JSON.
Exit 0 when the cards agree on every compared field, 1 when they differ (like `diff`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.core.errors import RET_BLOCKED, RET_OK

_EPILOG = (
    "Compared: fixture seal, tree digest, image ID, suite sha256, freeze set, status, exit code, oracle "
    "edits, base rev; per property (by id): kind, band, trials, hits, hit rate, interval, median and max "
    "duration, detail; properties only one card has. Exit 0: no differences but durations (shown; they "
    "change on every run); 1: the cards differ; "
    "65: a card is malformed; 66: a card is missing or unreadable."
)


def add_diff_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `diff` to the `gate` command's subparsers."""
    parser = subparsers.add_parser(
        "diff", help="what changed between two verdict cards (exit 1 when they differ)", epilog=_EPILOG
    )
    parser.set_defaults(handler="gate.cli.diff:diff_command")
    parser.add_argument("card_a", type=Path, metavar="CARD_A", help="the earlier verdict card")
    parser.add_argument("card_b", type=Path, metavar="CARD_B", help="the later verdict card")
    parser.add_argument("--json", action="store_true", help="print the differences as one JSON document")
    return parser


def diff_command(args: argparse.Namespace) -> int:
    """`gate diff CARD_A CARD_B [--json]`."""
    return run_diff(args.card_a, args.card_b, as_json=args.json)


def run_diff(card_a: Path, card_b: Path, *, as_json: bool = False) -> int:
    """Print what differs from CARD_A to CARD_B; return 0 when nothing but durations does, else 1."""
    from gate.core.card.carddiff import diff_cards
    from gate.io.artifacts import read_card

    result = diff_cards(read_card(card_a), read_card(card_b))
    print(result.to_json() if as_json else result.to_text(), end="")
    return RET_OK if result.same else RET_BLOCKED
