"""Checks for windowcal. They run on the coordinator, outside every sandbox, and read only what the
sandbox observed: windowcal itself is never imported here (nor needed: the coordinator has no
PyYAML or dateutil)."""

from __future__ import annotations

from gate.core.checks import Trial


def windows_in_utc(trial: Trial) -> bool:
    """Contract: the next five windows, in UTC, across the DST switch, from the frozen clock."""
    got = trial.stdout_json().get("windows")
    expected = trial.fixture_json()["expected"]
    assert got == expected, f"windows {got} != {expected}"
    return True


def rejects_unknown_keys(trial: Trial) -> bool:
    """Contract: a schedule with a key windowcal does not know is refused, naming the key."""
    out = trial.stdout_json()
    want = trial.fixture_json()["expected_field"]
    assert "error" in out, f"accepted a schedule with unknown key {want!r}"
    assert out.get("field") == want, f"error names {out.get('field')!r}, not {want!r}"
    return True


def delays_within_cap(trial: Trial) -> bool:
    """Statistical: every retry delay lies in [0, min(cap, base * 2**attempt)]."""
    request = trial.fixture_json()
    delays = trial.stdout_json()["delays"]
    assert len(delays) == request["attempts"], f"{len(delays)} delays for {request['attempts']} attempts"
    for attempt, delay in enumerate(delays):
        bound = min(request["cap_s"], request["base_s"] * 2**attempt)
        assert 0 <= delay <= bound, f"attempt {attempt}: delay {delay:.3f} s outside [0, {bound}]"
    return True


def retries_fit_budget(trial: Trial) -> bool:
    """Statistical: a deploy step's retry delays add up to at most the window's slack. Full jitter
    makes this hold in about 19 draws of 20 (the paired suite asks whether a patch lowered that)."""
    request = trial.fixture_json()
    total = sum(trial.stdout_json()["delays"])
    assert total <= request["budget_s"], f"retries wait {total:.2f} s, over the {request['budget_s']} s budget"
    return True
