"""`gate accept`: read the card, the seal file and the suite, recompute what can be recomputed
(the tree's digest, every row's kind, the job's decision, and with `--base` the oracle edits), and
print the decision. Without `--card`/`--seal`, the suite's `[suite] card` and `[suite] seal`
(relative to gate.toml's folder in the tree being merged; with `--base` the suite naming them is
the base's).

Exit 0 only when `gate.core.card.acceptance.prove` says so and, when a public key is named (--key,
$PROBEGATE_ACCEPT_KEY or `[suite] public_key`), the card's envelope (gate.io.cardsig) proves the card
file, the recomputed tree and the base under that key; a missing or unreadable card is a failed
gate (1). Bad arguments (a missing seal file or suite, a workdir that is not a folder, a base that
is not a commit) are usage errors as for every command.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from gate.cli.settings import settings_of
from gate.core.card.acceptance import decide_merge
from gate.core.card.card import Acceptance, VerdictCard
from gate.core.errors import RET_BLOCKED, RET_OK, GateError, InputMissingError, UsageError
from gate.core.escaping import one_line
from gate.io.artifacts import parse_card
from gate.io.cardsig import signature_reason
from gate.io.inputs import read_input
from gate.io.keys import VerifyKey, load_verify_key
from gate.io.snapshot import tree_digest
from gate.io.treeselect import tree_selection
from gate.run.forecast import merge_facts
from gate.run.oracle import OracleRequest, read_oracle


def accept_command(args: argparse.Namespace) -> int:
    """`gate accept`: the card, seal and key from the flags, the key else from $PROBEGATE_ACCEPT_KEY."""
    return run_accept(
        args.card,
        args.seal,
        workdir=args.workdir,
        suite=args.suite,
        base=args.base,
        allow_unchecked_oracle=args.allow_unchecked_oracle,
        allow_unenrolled_workers=args.allow_unenrolled_workers,
        allow_replayed_seeds=args.allow_replayed_seeds,
        key=args.key or settings_of(args).accept_key,
    )


def run_accept(
    card_path: Path | None,
    seal_path: Path | None,
    *,
    workdir: Path,
    suite: Path,
    base: str | None = None,
    allow_unchecked_oracle: bool = False,
    allow_unenrolled_workers: bool = False,
    allow_replayed_seeds: bool = False,
    key: Path | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Print one JSON line with the decision and its reasons; return the exit code. `card_path` or
    `seal_path` None: the one the suite names; `key` (the entry point's --key or $PROBEGATE_ACCEPT_KEY, else the suite's
    `public_key`): the public key whose signature the card must carry; `now` is accept's own time."""
    if not workdir.is_dir():
        raise InputMissingError("the tree being merged is not a folder", file=str(workdir), field="--workdir")
    request = OracleRequest(suite=suite, workdir=workdir, seal=seal_path, base=base, calibrated_deadlines=False)
    with read_oracle(request) as oracle:
        card_path = card_path or oracle.card
        if card_path is None:
            raise UsageError("no card path: pass --card or set [suite] card", file=str(suite), field="--card")
        # The same selection the run's snapshot took (git's view, the suite's globs, the card left out).
        digest = tree_digest(workdir, tree_selection(oracle.suite, workdir, suite_file=suite))
        verifier = _trusted_key(key, oracle.suite.public_key_path)
        try:
            data = read_input(card_path, "verdict card")
            card = parse_card(data, card_path)
        except GateError as exc:
            return _print(None, Acceptance(accepted=False, reasons=(str(exc),)))
        # Required (a key is named): checked here, where the envelope file is read; judged with the rest.
        problem = None
        if verifier is not None:
            base = oracle.base_commit if oracle.base_commit is not None else card.base_rev
            problem = signature_reason(card_path, card, data, verifier, tree_digest=digest, base_commit=base)
        facts = merge_facts(
            oracle,
            tree_digest=digest,
            now=now(),
            allow_unchecked_oracle=allow_unchecked_oracle,
            allow_unenrolled_workers=allow_unenrolled_workers,
            allow_replayed_seeds=allow_replayed_seeds,
            signature_problem=problem,
        )
        result = decide_merge(card, facts)
    return _print(card, result, key_id=verifier.key_id if verifier else None)


def _trusted_key(named: Path | None, suite_key: Path | None) -> VerifyKey | None:
    """The public key a signature is required by: --key (or $PROBEGATE_ACCEPT_KEY), else the suite's
    `public_key` (with --base, the base's copy); None: no signature required."""
    path = named or suite_key
    return load_verify_key(path) if path is not None else None


def _print(card: VerdictCard | None, result: Acceptance, *, key_id: str | None = None) -> int:
    line: dict[str, object] = {"accepted": result.accepted, "reasons": list(result.reasons)}
    if card:
        line["run_id"] = card.run_id
    if key_id:
        line["signature_key"] = key_id  # the key the card's signature was required by
    print(json.dumps(line))
    word = "ACCEPTED" if result.accepted else "REJECTED"
    # Reasons quote the card and its envelope (ids, details, key id hints): escaped, one line.
    print(f"gate accept: {word}: {one_line('; '.join(result.reasons))}", file=sys.stderr)
    return RET_OK if result.accepted else RET_BLOCKED
