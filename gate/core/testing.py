"""Trial-spec and verdict factories for tests and benchmarks (the doubles are beside their seams:
gate.run.executors.mock, worker.host.sandboxes.stub). Pure: no container, broker or file is touched.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gate.core.suite.plan import trial_seed
from gate.core.suite.trial import ClockSpec, TrialSpec
from gate.core.verdicts.verdict import Band, Kind, Verdict

FROZEN_AT = datetime(2026, 3, 1, tzinfo=UTC)


def make_spec(trial_index: int = 0, **fields: Any) -> TrialSpec:
    """A trial spec with plausible defaults (run "r", property "p", the frozen 2026-03-01 instant, the
    seed the planner would derive); any field can be given."""
    values: dict[str, Any] = {
        "run_id": "r",
        "property_id": "p",
        "probe_argv": ("python3", "probe.py"),
        "tree_digest": "t",
        "fixture_path": "f.json",
        "fixture_digest": "f",
        "deadline_s": 2.0,
        "clock": ClockSpec(frozen_at=FROZEN_AT),
    }
    values.update(fields)
    values.setdefault("seed", trial_seed(values["run_id"], values["property_id"], trial_index))
    return TrialSpec(trial_index=trial_index, **values)


def make_verdict(property_id: str, band: Band, kind: Kind, detail: str = "", *, creditable: bool = True) -> Verdict:
    """A one-trial verdict; a harness_error is one proven outside the patch unless `creditable=False`."""
    return Verdict(
        kind=kind,
        property_id=property_id,
        band=band,
        fixture_digest="0" * 64,
        trials=1,
        hits=0,
        detail=detail,
        creditable=creditable and kind is Kind.HARNESS_ERROR,
    )


def make_specs(n: int, *, first: int = 0, **fields: Any) -> list[TrialSpec]:
    """`n` specs sharing `fields`, trial indices `first`..`first + n - 1`."""
    return [make_spec(i, **fields) for i in range(first, first + n)]
