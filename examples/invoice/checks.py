"""Checks for the invoice example. They run on the coordinator, never inside the sandbox, and
judge only what the sandbox observed: the probe's output and the files it wrote."""

from __future__ import annotations

from datetime import UTC
from decimal import ROUND_HALF_EVEN, Decimal

from gate.core.checks import Trial

CENT = Decimal("0.01")
SHAPE_V3 = {"invoice_id": str, "currency": str, "net": str, "tax": str, "total": str, "issued_at": str}


def line_total(lines: list[dict], tax_rate: str) -> Decimal:
    """Net plus tax, tax rounded half-even to the cent (the business rule, owned by the oracle)."""
    net = sum((Decimal(row["amount"]) for row in lines), Decimal("0"))
    return net + (net * Decimal(tax_rate)).quantize(CENT, rounding=ROUND_HALF_EVEN)


def invoice_total(trial: Trial) -> bool:
    """Contract: the printed total equals the fixture's expected total, itself the half-even sum."""
    fixture = trial.fixture_json()
    expect = Decimal(fixture["expected_total"])
    assert line_total(fixture["lines"], fixture["tax_rate"]) == expect, "fixture disagrees with its own rule"
    got = Decimal(trial.stdout_json()["total"])
    assert got == expect, f"total drift {got} != {expect}"
    return True


def json_shape_v3(trial: Trial) -> bool:
    """Contract: exactly the v3 keys with string values, issued at the frozen instant."""
    out = trial.stdout_json()
    assert isinstance(out, dict), f"expected an object, got {type(out).__name__}"
    assert set(out) == set(SHAPE_V3), f"keys {sorted(out)} != {sorted(SHAPE_V3)}"
    for key, kind in SHAPE_V3.items():
        assert isinstance(out[key], kind), f"{key} is {type(out[key]).__name__}"
    if trial.clock is not None:
        frozen = trial.clock.frozen_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert out["issued_at"] == frozen, f"issued_at {out['issued_at']} != frozen clock {frozen}"
    return True


def tool_choice(trial: Trial) -> bool:
    """Statistical: the tool chosen for the query is the expected one."""
    got = trial.stdout_json().get("tool")
    assert got == trial.fixture_json()["expected_tool"], f"chose {got}"
    return True
