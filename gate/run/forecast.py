"""What `gate accept` will decide on the card a run has just written, so `gate run` prints one answer:
the one accept path (gate.core.card.acceptance.decide_merge), fed from the run's own oracle (the base's
seal, suite, freeze file and public key, the oracle edits) and the files just written, with the flags
a CI job passes by default (no --allow-* flag, no --key beyond the suite's)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from gate.core.card.acceptance import AcceptFacts, decide_merge
from gate.core.card.card import Acceptance, VerdictCard
from gate.core.errors import GateError
from gate.io.cardsig import signature_reason
from gate.io.inputs import read_input
from gate.io.keys import load_verify_key
from gate.run.oracle import Oracle


def forecast(card: VerdictCard, card_path: Path, oracle: Oracle, *, tree_digest: str, now: datetime) -> Acceptance:
    """Accept's decision on `card` at `card_path` for the tree of `tree_digest`, at `now`."""
    problem = _signature_problem(card, card_path, oracle, tree_digest)
    return decide_merge(card, merge_facts(oracle, tree_digest=tree_digest, now=now, signature_problem=problem))


def merge_facts(
    oracle: Oracle,
    *,
    tree_digest: str,
    now: datetime,
    allow_unchecked_oracle: bool = False,
    allow_unenrolled_workers: bool = False,
    allow_replayed_seeds: bool = False,
    signature_problem: str | None = None,
) -> AcceptFacts:
    """What the merge decision takes from the oracle (the base's seal, suite, freeze file, the edits),
    for `gate accept` and for the run's forecast alike."""
    return AcceptFacts(
        seal_digest=oracle.expected.digest,
        tree_digest=tree_digest,
        suite_sha256=oracle.suite.sha256,
        bands=oracle.suite.bands(),
        freeze_file=oracle.freeze_file,
        base_commit=oracle.base_commit,
        oracle_edits=oracle.edits,
        now=now,
        allow_unchecked_oracle=allow_unchecked_oracle,
        allow_unenrolled_workers=allow_unenrolled_workers,
        allow_replayed_seeds=allow_replayed_seeds,
        signature_problem=signature_problem,
    )


def _signature_problem(card: VerdictCard, card_path: Path, oracle: Oracle, tree_digest: str) -> str | None:
    """What accept will find wrong with the card's signature under the suite's `public_key` (None: nothing,
    or the suite names no key), read from the files just written, as accept reads them."""
    key_path = oracle.suite.public_key_path
    if key_path is None:
        return None
    try:
        key = load_verify_key(key_path)
        data = read_input(card_path, "verdict card")
    except GateError as exc:
        return str(exc)
    base = oracle.base_commit if oracle.base_commit is not None else card.base_rev
    return signature_reason(card_path, card, data, key, tree_digest=tree_digest, base_commit=base)
