"""Secure by default: `gate run --broker` without a worker registry refuses to start unless given
--allow-unenrolled-workers; a card made so records it, and `gate accept` refuses it unless told the same."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.mini_suite import Suite, build_suite, good, run

from gate.cli.accept import run_accept
from gate.cli.executors import Placement, enrolled_workers
from gate.cli.main import main
from gate.core.errors import RET_BLOCKED, RET_CONFIG, RET_NOINPUT, RET_OK
from gate.core.suite.trial import Observation
from gate.io.keys import public_path, write_new_key

IMAGE = "sha256:" + "a" * 64
BROKER = "redis://127.0.0.1:1/0"  # never reached: the refusal comes first
REFUSED = "refused unless --allow-unenrolled-workers"


@pytest.fixture(autouse=True)
def no_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No registry: none named in the environment, and no default file under the working folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROBEGATE_WORKERS", raising=False)
    monkeypatch.delenv("PROBEGATE_REQUIRE_SIGNED", raising=False)


def real(spec, fixture: bytes) -> Observation:
    """`good`, from a sandbox with a real-looking image ID (accept refuses the mock's)."""
    return good(spec, fixture).model_copy(update={"image_id": IMAGE})


def unenrolled_run(tmp_path: Path, **request) -> tuple[Suite, list[dict]]:
    """A mini suite run as `gate run --broker --allow-unenrolled-workers` makes it; the suite and the JSON lines."""
    (tmp_path / "s").mkdir()
    suite = build_suite(tmp_path / "s")
    suite = Suite(replace(suite.request, unenrolled_workers=True, **request), suite.fixtures, suite.card, suite.ledger)
    said: list[str] = []
    run(suite, real, said.append, image_id=IMAGE)
    return suite, [json.loads(line) for line in said]


def accept(suite: Suite, capsys: pytest.CaptureFixture[str], **flags) -> tuple[int, dict]:
    """`gate accept` on the suite's card (no base: the oracle is allowed unchecked); (exit, its JSON line)."""
    request = suite.request
    code = run_accept(
        suite.card, request.seal, workdir=request.workdir, suite=request.suite, allow_unchecked_oracle=True, **flags
    )
    return code, json.loads(capsys.readouterr().out.splitlines()[-1])


@pytest.mark.parametrize("command", ["run", "baseline"])
def test_a_broker_without_a_registry_is_refused_at_start(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line saying how to enrol workers, exit 65 (a configuration error), and nothing written."""
    (tmp_path / "work").mkdir()
    extra = ["--calibration", str(tmp_path / "cal.json")] if command == "baseline" else []
    argv = [command, "--workdir", str(tmp_path / "work"), "--card", str(tmp_path / "card.json"), *extra]
    assert main([*argv, "--broker", BROKER]) == RET_CONFIG
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("gate: error: .probegate/workers.json: --broker: no worker registry")
    assert "`gate workers enrol PUBKEY_FILE --name NAME`" in err and "--allow-unenrolled-workers" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_the_flag_or_a_registry_decides_what_the_card_will_say(tmp_path: Path) -> None:
    """With the flag and no registry the run is unenrolled; a registry makes the flag moot; no broker, no workers."""
    assert enrolled_workers(None, allow_unenrolled=True) is None
    assert Placement(broker=BROKER).unenrolled and not Placement().unenrolled
    (tmp_path / ".probegate").mkdir()
    (tmp_path / ".probegate" / "workers.json").write_text('{"workers": []}')
    found = enrolled_workers(None, allow_unenrolled=True)
    assert found is not None and not Placement(broker=BROKER, enrolled=found).unenrolled


def test_an_unenrolled_card_says_so_and_accept_refuses_it_unless_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The card records unenrolled workers; the run's own forecast and `gate accept` refuse it, naming why,
    and accept given --allow-unenrolled-workers takes it."""
    suite, lines = unenrolled_run(tmp_path)
    card = json.loads(suite.card.read_text())
    assert card["unenrolled_workers"] is True and card["exit_code"] == RET_OK
    job = lines[-1]
    assert not job["accepted"] and any("trials ran on unenrolled workers" in r for r in job["accept_reasons"])
    code, said = accept(suite, capsys)
    assert code == RET_BLOCKED and [r for r in said["reasons"] if REFUSED in r]
    code, said = accept(suite, capsys, allow_unenrolled_workers=True)
    assert code == RET_OK and said["accepted"], said


def test_a_card_that_drops_the_field_is_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Adversarial: the field deleted by hand does not make an enrolled card; accept cannot read it at all."""
    suite, _ = unenrolled_run(tmp_path)
    card = json.loads(suite.card.read_text())
    del card["unenrolled_workers"]
    suite.card.write_text(json.dumps(card, indent=2))
    code, said = accept(suite, capsys, allow_unenrolled_workers=True)
    assert code == RET_BLOCKED and "unenrolled_workers" in said["reasons"][0] and "Field required" in said["reasons"][0]


def test_a_signed_card_edited_to_enrolled_fails_its_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Adversarial: the signature covers the field; a card flipped to enrolled (or with it dropped) is refused."""
    key = write_new_key(tmp_path / "keys" / "gate.key")
    suite, _ = unenrolled_run(tmp_path, sign_key=tmp_path / "keys" / "gate.key")
    signed = public_path(tmp_path / "keys" / "gate.key")
    assert accept(suite, capsys, key=signed, allow_unenrolled_workers=True)[0] == RET_OK
    card = json.loads(suite.card.read_text())
    suite.card.write_text(json.dumps({**card, "unenrolled_workers": False}, indent=2))
    code, said = accept(suite, capsys, key=signed)
    assert code == RET_BLOCKED and said["signature_key"] == key.key_id
    assert said["reasons"][0] == "the card file is not the signed card: its bytes changed after signing"
    del card["unenrolled_workers"]
    suite.card.write_text(json.dumps(card, indent=2))
    assert accept(suite, capsys, key=signed, allow_unenrolled_workers=True)[0] == RET_BLOCKED


def test_the_retired_variable_is_said_to_be_ignored(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """$PROBEGATE_REQUIRE_SIGNED no longer changes anything (it is the default); a run says so in one warning."""
    monkeypatch.setenv("PROBEGATE_REQUIRE_SIGNED", "1")
    (tmp_path / "work").mkdir()
    argv = ["run", "--workdir", "work", "--suite", "missing.toml", "--broker", BROKER, "--allow-unenrolled-workers"]
    assert main(argv) == RET_NOINPUT  # it went on: the missing suite is what stops it
    warning, error = capsys.readouterr().err.splitlines()
    assert warning.startswith("gate: warning: $PROBEGATE_REQUIRE_SIGNED is deprecated and ignored")
    assert "missing.toml" in error
