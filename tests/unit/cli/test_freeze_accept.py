"""Freezes as `accept` sees them at its own time: a run whose contract miss a freeze excuses, then
`run_accept` before and after that freeze expires, and with a freeze nobody owns; no Docker."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from support.mini_suite import CONTRACT, NOW, Suite, build_suite, but, run, stdout

from gate.cli.accept import run_accept
from gate.core.suite.trial import Observation
from gate.core.verdicts.verdict import Kind
from gate.io.fixtures import seal_tree

EXPIRES = NOW + timedelta(hours=1)


def wrong_total(spec, fixture) -> Observation:
    return Observation.of(spec, exit_code=0, image_id="sha256:mock", stdout=stdout({"total": "0"}))


def frozen_suite(tmp_path: Path, owner: str) -> Suite:
    """The mini suite with a freeze file excusing the contract property until EXPIRES, owned by `owner`."""
    suite = build_suite(tmp_path)
    entry = {
        "freeze_id": "fz-1",
        "properties": [CONTRACT],
        "seal": seal_tree(suite.fixtures).digest,
        "reason": "colour changed on the base",
        "expires_at": EXPIRES.isoformat(),
        "owner": owner,
    }
    (tmp_path / "freeze.json").write_text(json.dumps({"freezes": [entry]}))
    toml = suite.request.suite
    toml.write_text(
        toml.read_text().replace('checks = "checks.py"\n', 'checks = "checks.py"\nfreeze_file = "freeze.json"\n')
    )
    return suite


def accept_reasons(suite: Suite, capsys: pytest.CaptureFixture[str], at) -> list[str]:
    capsys.readouterr()
    run_accept(suite.card, suite.request.seal, workdir=suite.request.workdir, suite=suite.request.suite, now=lambda: at)
    return json.loads(capsys.readouterr().out.splitlines()[-1])["reasons"]


def test_a_freeze_that_lapses_between_run_and_accept_excuses_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's card excuses the frozen contract miss; accept within the freeze's life raises no freeze
    reason, and accept after its expiry refuses, naming the freeze and both instants."""
    suite = frozen_suite(tmp_path, "@alice")
    result, _ = run(suite, but(CONTRACT, wrong_total))
    row = next(r for r in result.card.properties if r.id == CONTRACT)
    assert (row.kind, row.voting, result.card.freeze_set) == (Kind.FAIL_CONTRACT, False, {CONTRACT: "fz-1"})
    assert not [r for r in accept_reasons(suite, capsys, NOW + timedelta(minutes=30)) if "freeze" in r]
    late = accept_reasons(suite, capsys, EXPIRES + timedelta(seconds=1))
    assert f"property {CONTRACT}'s vote depends on freeze fz-1, which expired at {EXPIRES.isoformat()}" in late[-1]


def test_a_freeze_nobody_owns_excuses_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An ownerless freeze is inactive in the run: the contract miss votes and blocks, and accept refuses."""
    suite = frozen_suite(tmp_path, "")
    result, _ = run(suite, but(CONTRACT, wrong_total))
    assert result.card.freeze_set == {} and result.card.freezes_inactive == {"fz-1": "it has no owner"}
    assert result.card.exit_code == 1
    assert any("fail_contract" in r for r in accept_reasons(suite, capsys, NOW))
