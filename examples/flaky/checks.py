"""The one check of the flaky example: the probe said `ok`."""

from __future__ import annotations

from gate.core.checks import Trial


def says_ok(trial: Trial) -> bool:
    """Contract: the probe printed `ok`."""
    said = trial.stdout.strip()
    assert said == "ok", f"the probe said {said[:40]!r}"
    return True
