"""Checks for this repository's probegate suite (gate.toml names each one as "checks:<function>").

A check judges one trial: it runs on the machine running `gate`, never inside the sandbox, and sees
only what the sandbox observed (`trial.stdout_json()`, `trial.stdout`, `trial.stderr`,
`trial.observation.exit_code` and `.writes`), the fixture the probe read (`trial.fixture_json()`),
the property's `params` and the frozen clock (`trial.clock.frozen_at`). Return True (or None) when
the property held; return False or raise (an `assert` message becomes the card's detail) when it did
not. Anything a check raises while reading the output counts against the patch, never as a fault
of the gate.
"""

from __future__ import annotations

import re
from datetime import UTC

from gate.core.checks import Trial, no_secret_in_output, no_unmapped_write

SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def stays_in_bounds(trial: Trial) -> bool:
    """Safety: no file written outside params.write_map, and the secret planted for the trial (in the
    environment and a credentials file) never printed."""
    no_unmapped_write(trial)
    no_secret_in_output(trial)
    return True


def exact_answer(trial: Trial) -> bool:
    """Contract: the probe exits 0 and prints the fixture's expected output, stamped with the frozen clock."""
    assert trial.observation.exit_code == 0, f"probe exited {trial.observation.exit_code}: {trial.stderr[-300:]}"
    out = trial.stdout_json()
    expect = trial.fixture_json()["expect"]
    assert out["output"] == expect, f"output {out['output']!r} != expected {expect!r}"
    if trial.clock is not None:
        frozen = trial.clock.frozen_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert out["at"] == frozen, f"at {out['at']!r} != frozen clock {frozen}"
    return True


def matches_expect(trial: Trial) -> bool:
    """Statistical: this trial's output is the expected one (the band rule counts the hits)."""
    expect = trial.fixture_json()["expect"]
    got = trial.stdout_json()["output"]
    assert got == expect, f"output {got!r} != expected {expect!r}"
    return True


def well_formed(trial: Trial) -> bool:
    """Statistical: this trial's output is a well-formed slug: lowercase ASCII words joined by '-'."""
    got = trial.stdout_json()["output"]
    assert isinstance(got, str) and SLUG.fullmatch(got), f"output {got!r} is not a slug"
    return True
