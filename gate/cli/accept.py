"""`gate accept`: read the card, the seal file and the suite, recompute what can be recomputed
(the tree's digest, every row's kind, the job's decision), print the decision.

Exit 0 only when `gate.core.acceptance.prove` says so; a missing or unreadable card is a failed
gate (1). Bad arguments (a missing seal file or suite, a workdir that is not a folder) are usage
errors as for every command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gate.core.acceptance import prove
from gate.core.errors import RET_BLOCKED, RET_OK, GateError, InputMissingError
from gate.io.artifacts import read_card
from gate.io.fixtures import read_seal_file
from gate.io.snapshot import tree_digest
from gate.io.suite import load_suite


def run_accept(
    card_path: Path, seal_path: Path, *, workdir: Path, suite: Path, allow_unchecked_oracle: bool = False
) -> int:
    """Print one JSON line with the decision and its reasons; return the exit code."""
    seal = read_seal_file(seal_path)
    loaded = load_suite(suite)
    if not workdir.is_dir():
        raise InputMissingError("the tree being merged is not a folder", file=str(workdir), field="--workdir")
    digest = tree_digest(workdir, loaded.config.outputs)
    try:
        card = read_card(card_path)
    except GateError as exc:
        print(json.dumps({"accepted": False, "reasons": [str(exc)]}))
        print(f"gate accept: REJECTED: {exc}", file=sys.stderr)
        return RET_BLOCKED
    result = prove(
        card,
        seal_digest=seal.digest,
        tree_digest=digest,
        suite_sha256=loaded.sha256,
        bands=loaded.bands(),
        allow_unchecked_oracle=allow_unchecked_oracle,
    )
    print(json.dumps({"accepted": result.accepted, "run_id": card.run_id, "reasons": list(result.reasons)}))
    word = "ACCEPTED" if result.accepted else "REJECTED"
    print(f"gate accept: {word}: {'; '.join(result.reasons)}", file=sys.stderr)
    return RET_OK if result.accepted else RET_BLOCKED
