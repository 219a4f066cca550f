"""Enrolled workers without services: the signed-result encoding, the roster's rules, every refusal
of check_result, the registry file, and a worker's signature as the coordinator checks it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.errors import InputMissingError
from gate.core.testing import make_specs
from gate.core.trust.enrolment import (
    RESULT_DOMAIN,
    EnrolledWorker,
    EnrolmentRefused,
    Refusal,
    Roster,
    check_result,
    enrol,
    result_message,
    revoke,
    spec_digest,
)
from gate.io.keys import SigningKey, write_new_key
from gate.io.workers import RegistryFileError, load_roster, save_roster, verify_pem
from worker.celery.shared.wire import encode_batch, encode_observations
from worker.celery.worker.settings import PoolSettings, configure
from worker.celery.worker.signing import sign_result

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def enrolled(key: SigningKey, name: str = "box1") -> EnrolledWorker:
    return EnrolledWorker(name=name, key_id=key.key_id, public_key=key.public().pem().decode(), enrolled_at=NOW)


@given(st.lists(st.tuples(st.text(), st.text(), st.text()), min_size=2, max_size=2, unique=True))
def test_result_message_is_unambiguous(triples: list[tuple[str, str, str]]) -> None:
    """Distinct (batch id, spec digest, observations) never share a signed message; all carry the domain."""
    first, second = (result_message(*t) for t in triples)
    assert first != second
    assert first.startswith(RESULT_DOMAIN) and second.startswith(RESULT_DOMAIN)


def test_field_boundaries_cannot_shift() -> None:
    """Moving bytes from one field to the next changes the message (length prefixes)."""
    assert result_message("ab", "c", "x") != result_message("a", "bc", "x")


def test_spec_digest_survives_the_broker() -> None:
    """The digest the coordinator takes of the batch it sends equals the worker's of the batch it receives."""
    payload = encode_batch(make_specs(4, run_id="r"))
    received = json.loads(json.dumps(payload, indent=3))  # any JSON encoding on the way
    assert spec_digest(received) == spec_digest(payload)
    assert spec_digest({**payload, "indices": [0, 1, 2, 5]}) != spec_digest(payload)


def test_roster_rules() -> None:
    """A key enrols once (revoked keys stay revoked); a name is unique among active workers."""
    a, b = SigningKey.generate(), SigningKey.generate()
    roster = enrol(Roster(), enrolled(a))
    with pytest.raises(EnrolmentRefused, match="already enrolled"):
        enrol(roster, enrolled(a, "other"))
    with pytest.raises(EnrolmentRefused, match="named 'box1'"):
        enrol(roster, enrolled(b))
    roster, was = revoke(roster, "box1", NOW)
    assert was.active and not roster.by_key(a.key_id).active  # type: ignore[union-attr]
    with pytest.raises(EnrolmentRefused, match="already revoked"):
        enrol(roster, enrolled(a, "again"))
    with pytest.raises(EnrolmentRefused, match="no enrolled worker"):
        revoke(roster, "box1", NOW)
    roster = enrol(roster, enrolled(b))  # the name is free again, for a new key
    assert roster.by_name("box1").key_id == b.key_id  # type: ignore[union-attr]


class TestCheckResult:
    """check_result names the signer, or exactly why the result is refused."""

    key = SigningKey.generate()
    observations = encode_observations([])
    issued: ClassVar[dict[str, str]] = {"batch-1": "d1", "batch-2": "d2"}

    def signed(self, batch_id: str = "batch-1", spec: str = "d1", key: SigningKey | None = None, **over: str) -> dict:
        signer = key or self.key
        sig = signer.sign(result_message(batch_id, spec, self.observations)).hex()
        return {"key_id": signer.key_id, "batch_id": batch_id, "spec_digest": spec, "signature": sig, **over}

    def check(self, claim: object, roster: Roster | None = None, observations: str | None = None):
        roster = roster or Roster(workers=(enrolled(self.key),))
        return check_result(roster, self.issued, "batch-1", observations or self.observations, claim, verify_pem)

    def test_accepted(self) -> None:
        """A signature by an enrolled key over the issued batch id and spec names that worker."""
        assert self.check(self.signed()) == enrolled(self.key)

    @pytest.mark.parametrize("claim", [None, {}, "x", {"key_id": "k"}])
    def test_unsigned(self, claim: object) -> None:
        """No signature, or one that does not parse, is unsigned_result."""
        assert self.check(claim)[0] is Refusal.UNSIGNED  # type: ignore[index]

    def test_bad_hex_is_unsigned(self) -> None:
        """A signature that is not hex is unsigned_result, never an exception."""
        assert self.check(self.signed(signature="zz"))[0] is Refusal.UNSIGNED  # type: ignore[index]

    def test_unknown_and_revoked(self) -> None:
        """A key never enrolled is unknown_worker_key; an enrolled one revoked since is revoked_worker."""
        stranger = SigningKey.generate()
        assert self.check(self.signed(key=stranger))[0] is Refusal.UNKNOWN_KEY  # type: ignore[index]
        roster, _ = revoke(Roster(workers=(enrolled(self.key),)), "box1", NOW)
        assert self.check(self.signed(), roster)[0] is Refusal.REVOKED  # type: ignore[index]

    def test_wrong_batch_or_spec(self) -> None:
        """Signed for a batch never issued, for another issued batch, or over another spec: refused."""
        assert self.check(self.signed("batch-9"))[0] is Refusal.UNISSUED  # type: ignore[index]
        assert self.check(self.signed("batch-2", "d2"))[0] is Refusal.REPLAYED  # type: ignore[index]
        assert self.check(self.signed(spec="d9"))[0] is Refusal.REPLAYED  # type: ignore[index]

    def test_forged(self) -> None:
        """A claim of an enrolled key id with another key's signature, or edited observations, is forged_result."""
        other = SigningKey.generate()
        assert self.check(self.signed(key=other, key_id=self.key.key_id))[0] is Refusal.FORGED  # type: ignore[index]
        assert self.check(self.signed(), observations=self.observations + " ")[0] is Refusal.FORGED  # type: ignore[index]


def test_worker_signature_checks_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker's task attaches verifies at the coordinator for the batch it was handed, and only that."""
    import worker.celery.worker.signing as signing

    monkeypatch.setattr(signing, "_key", None)
    configure(PoolSettings.from_env({signing.ENV_KEY: str(tmp_path / "w.key")}))
    payload = encode_batch(make_specs(3, run_id="r"))
    observations = encode_observations([])
    claim = sign_result("task-1", payload, observations)
    roster = Roster(workers=(enrolled(signing.worker_key()),))
    issued = {"task-1": spec_digest(payload)}
    assert isinstance(check_result(roster, issued, "task-1", observations, claim, verify_pem), EnrolledWorker)
    assert (tmp_path / "w.key").stat().st_mode & 0o777 == 0o600  # created at first use, private


def test_registry_file(tmp_path: Path) -> None:
    """The registry round-trips; a missing one is empty only when allowed; a garbled one names its file."""
    path = tmp_path / "workers.json"
    with pytest.raises(InputMissingError):
        load_roster(path)
    assert load_roster(path, missing_ok=True) == Roster()
    roster = Roster(workers=(enrolled(write_new_key(tmp_path / "k")),))
    save_roster(path, roster)
    assert load_roster(path) == roster
    path.write_text('{"workers": [{"name": 3}]}')
    with pytest.raises(RegistryFileError, match=r"workers\.json"):
        load_roster(path)
    assert verify_pem("not a key", b"s", b"m") is False
