"""What the dispatch benchmarks share (benchmarks/dispatch.py, benchmarks/dispatch_assigned.py): the trial
specs they send and the roster enrolling their workers' keys."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.core.suite.trial import TrialSpec
from gate.core.testing import make_spec
from gate.core.trust.enrolment import EnrolledWorker, Roster
from gate.io.keys import load_verify_key


def specs(n: int, tree_digest: str, fixture_digest: str, run_id: str) -> list[TrialSpec]:
    """`n` trials over four properties of one run, on one tree and fixture."""
    common = {"run_id": run_id, "tree_digest": tree_digest, "fixture_digest": fixture_digest}
    return [make_spec(i, property_id=f"p{i * 4 // n}", **common) for i in range(n)]


def enrolled_roster(public_keys: list[Path]) -> Roster:
    """Every benchmark worker's key enrolled (the workers made them at start)."""
    now = datetime.now(UTC)
    keys = [load_verify_key(path) for path in public_keys]
    return Roster(
        workers=tuple(
            EnrolledWorker(name=f"bench{i}", key_id=k.key_id, public_key=k.pem().decode(), enrolled_at=now)
            for i, k in enumerate(keys)
        )
    )
