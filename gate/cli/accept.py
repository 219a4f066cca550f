"""`gate accept`: read the card and the seal file, print the decision.

Exit 0 only when `gate.card.accept` says so; a missing or unreadable card is a failed gate (1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gate.core.card import accept
from gate.core.errors import RET_BLOCKED, RET_OK, GateError
from gate.io.artifacts import read_card
from gate.io.fixtures import read_seal_file


def run_accept(card_path: Path, seal_path: Path) -> int:
    """Print one JSON line with the decision and its reasons; return the exit code."""
    seal = read_seal_file(seal_path)
    try:
        card = read_card(card_path)
    except GateError as exc:
        print(json.dumps({"accepted": False, "reasons": [str(exc)]}))
        print(f"gate accept: REJECTED: {exc}", file=sys.stderr)
        return RET_BLOCKED
    result = accept(card, seal.digest)
    print(json.dumps({"accepted": result.accepted, "run_id": card.run_id, "reasons": list(result.reasons)}))
    word = "ACCEPTED" if result.accepted else "REJECTED"
    print(f"gate accept: {word}: {'; '.join(result.reasons)}", file=sys.stderr)
    return RET_OK if result.accepted else RET_BLOCKED
