"""`gate evidence CARD`: the reviewers' view of the trial records kept beside a card — per property the
trials that missed, timed out or faulted and a sample of passing ones (gate.core.report.evidence_view), as
escaped text or JSON. The store is verified first, exactly as `gate refold` verifies it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.core.errors import RET_OK, UsageError

_EPILOG = (
    "Each trial shown names its record, evidence/<digest>.json beside the card; the passing sample is "
    "the hits with the smallest record digests, the same on every reading. Exit 0: the view was printed; "
    "64: bad arguments (e.g. a --property the card has no row for); 65: a record is tampered, missing or "
    "extra, or the card is malformed or binds no evidence (the file named); 66: the card is missing."
)


def count(text: str) -> int:
    """argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text!r}")
    return value


def add_evidence_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `evidence` to the `gate` command's subparsers."""
    parser = subparsers.add_parser(
        "evidence", help="show a card's missed, timed-out and faulted trials and a sample of passes", epilog=_EPILOG
    )
    parser.set_defaults(handler="gate.cli.evidence:run_evidence")
    parser.add_argument("card", type=Path, metavar="CARD", help="the verdict card (its records: evidence/ beside it)")
    parser.add_argument("--json", action="store_true", help="print the view as one JSON document")
    parser.add_argument(
        "--property", action="append", default=[], metavar="ID", help="show only this property (repeatable)"
    )
    # The defaults are the view's own (evidence_view.DEFAULT_PASSES, DEFAULT_LIMIT), applied when a flag is
    # absent; the numbers are written out here so that parsing does not load the card models (a unit test
    # keeps them equal).
    parser.add_argument("--passes", type=count, metavar="N", help="passing trials sampled per property (default 3)")
    parser.add_argument(
        "--limit", type=count, metavar="N", help="missed, timed-out and faulted trials shown per property (default 20)"
    )
    return parser


def run_evidence(args: argparse.Namespace) -> int:
    """Verify the card's records, print the view; exit 0 (the card's own verdict is `gate accept`'s)."""
    from gate.core.report.evidence_view import build_review
    from gate.io.artifacts import read_card
    from gate.io.evidence import verified_evidence

    card = read_card(args.card)
    ids = {row.id for row in card.properties}
    for pid in args.property:
        if pid not in ids:
            raise UsageError(f"the card has no property {pid}", file=str(args.card), field="--property")
    sizes = {name: value for name in ("limit", "passes") if (value := getattr(args, name)) is not None}
    review = build_review(card, verified_evidence(card, args.card), only=set(args.property) or None, **sizes)
    print(review.to_json() if args.json else review.to_text(), end="")
    return RET_OK
