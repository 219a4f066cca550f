"""gate.freezes: the reviewed flake-freeze file and which of its entries apply to a run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from gate.core.errors import RET_CONFIG, FreezeFileError
from gate.core.policy.freezes import FreezeEntry, FreezeFile, FreezeState, dependent_freeze_reasons, resolve
from gate.core.verdicts.verdict import Band

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SEAL = "a" * 64
OTHER_SEAL = "b" * 64
BANDS = {"safe": Band.SAFETY, "shape": Band.CONTRACT, "rate": Band.STATISTICAL, "rate2": Band.STATISTICAL}


def entry(freeze_id="fz-1", properties=("rate",), seal=SEAL, expires=NOW + timedelta(days=1), **extra):
    return FreezeEntry(
        freeze_id=freeze_id,
        properties=properties,
        seal=seal,
        reason="colour changed on same bytes",
        expires_at=expires,
        **{"owner": "@alice", **extra},
    )


def run(*entries, seal=SEAL, now=NOW):
    return resolve(FreezeFile(freezes=entries), bands=BANDS, seal=seal, now=now, source="flake-freeze.json")


def test_empty_freeze_file_freezes_nothing():
    """A freeze file with no entries freezes nothing and skips nothing."""
    assert run() == FreezeState()


def test_active_entry_freezes_its_properties():
    """An unexpired entry under the run's seal freezes each named property under its freeze id."""
    state = run(entry(properties=("rate", "shape")))
    assert state.frozen == {"rate": "fz-1", "shape": "fz-1"}
    assert state.inactive == {}


def test_safety_property_is_refused():
    """A freeze naming a safety property is refused with a FreezeFileError naming the file and property."""
    with pytest.raises(FreezeFileError) as info:
        run(entry(properties=("rate", "safe")))
    assert "safe" in str(info.value)
    assert "safety" in str(info.value)
    assert str(info.value).startswith("flake-freeze.json: ")
    assert info.value.exit_code == RET_CONFIG


def test_safety_property_is_refused_even_in_an_expired_entry():
    """An expired or foreign-seal entry naming a safety property still makes the whole file refused."""
    with pytest.raises(FreezeFileError, match="safety"):
        run(entry(properties=("safe",), expires=NOW - timedelta(days=1)))
    with pytest.raises(FreezeFileError, match="safety"):
        run(entry(properties=("safe",), seal=OTHER_SEAL))


def test_unknown_property_is_refused():
    """A freeze naming a property the suite does not have is refused, naming it."""
    with pytest.raises(FreezeFileError, match="unknown property ghost"):
        run(entry(properties=("ghost",)))


def test_expired_entry_is_inactive_with_its_expiry():
    """An entry whose expiry has passed does not freeze and is listed inactive with the expiry."""
    expires = NOW - timedelta(minutes=1)
    state = run(entry(expires=expires))
    assert state.frozen == {}
    assert state.inactive == {"fz-1": f"expired at {expires.isoformat()}"}


def test_entry_expiring_exactly_now_is_inactive():
    """An entry that expires at the run's instant no longer applies."""
    state = run(entry(expires=NOW))
    assert state.frozen == {}
    assert "fz-1" in state.inactive


def test_foreign_seal_entry_is_inactive_naming_both_seals():
    """An entry observed under another seal does not freeze, and the reason names both seals' prefixes."""
    state = run(entry(seal=OTHER_SEAL))
    assert state.frozen == {}
    assert state.inactive == {"fz-1": f"observed under seal {OTHER_SEAL[:16]}, run is {SEAL[:16]}"}


def test_expiry_is_reported_before_seal_mismatch():
    """An entry both expired and foreign is reported as expired."""
    state = run(entry(seal=OTHER_SEAL, expires=NOW - timedelta(seconds=1)))
    assert state.inactive["fz-1"].startswith("expired at")


def test_first_active_entry_wins_for_a_property():
    """When two active entries name one property, the first entry's id is recorded."""
    state = run(entry("fz-1"), entry("fz-2", properties=("rate", "rate2")))
    assert state.frozen == {"rate": "fz-1", "rate2": "fz-2"}


def test_inactive_and_active_entries_mix():
    """Inactive entries are skipped while active ones still freeze."""
    state = run(entry("old", expires=NOW - timedelta(days=1)), entry("new", properties=("rate2",)))
    assert state.frozen == {"rate2": "new"}
    assert set(state.inactive) == {"old"}


def test_aware_now_in_another_zone_compares_as_the_same_instant():
    """Expiry compares instants, not wall-clock fields, across time zones."""
    plus2 = timezone(timedelta(hours=2))
    state = run(entry(expires=NOW + timedelta(minutes=1)), now=NOW.astimezone(plus2))
    assert state.frozen == {"rate": "fz-1"}


# --- the model --------------------------------------------------------------------------------------


def test_retry_allowed_true_is_refused_by_the_model():
    """retry_allowed can only be false: true is a validation error."""
    with pytest.raises(ValidationError):
        entry(retry_allowed=True)


def test_retry_allowed_defaults_to_false():
    """An entry without retry_allowed has it false."""
    assert entry().retry_allowed is False


@pytest.mark.parametrize(
    "changes",
    [
        {"seal": "A" * 64},
        {"seal": "a" * 63},
        {"properties": ()},
        {"freeze_id": ""},
        {"reason": ""},
        {"expires_at": datetime(2026, 3, 2)},  # naive: refused
        {"flaky": True},
    ],
)
def test_malformed_entries_are_refused(changes):
    """Bad seal, no properties, empty id/reason, a naive expiry or an unknown key are refused."""
    data = {
        "freeze_id": "f",
        "properties": ["rate"],
        "seal": SEAL,
        "reason": "r",
        "expires_at": "2026-03-02T00:00:00Z",
        **changes,
    }
    with pytest.raises(ValidationError):
        FreezeEntry.model_validate(data)


def test_freeze_file_parses_from_json():
    """A freeze file in its JSON form validates into entries with aware expiries."""
    text = (
        '{"freezes": [{"freeze_id": "fz-7", "properties": ["rate"], "seal": "' + SEAL + '", '
        '"reason": "r", "expires_at": "2026-03-02T00:00:00Z", "retry_allowed": false}]}'
    )
    ff = FreezeFile.model_validate_json(text)
    assert ff.freezes[0].freeze_id == "fz-7"
    assert ff.freezes[0].expires_at.tzinfo is not None


def test_freeze_file_refuses_unknown_top_level_keys():
    """A freeze file with an unknown top-level key is refused."""
    with pytest.raises(ValidationError):
        FreezeFile.model_validate({"freezes": [], "retries": 1})


def test_an_entry_with_no_owner_freezes_nothing():
    """A freeze nobody owns (absent, empty or blank owner) is inactive, saying so: no ownerless quarantine."""
    state = run(entry(owner=""), entry(freeze_id="fz-2", properties=("shape",), owner="  "))
    assert state.frozen == {}
    assert state.inactive == {"fz-1": "it has no owner", "fz-2": "it has no owner"}


def test_an_owner_with_a_control_character_is_refused():
    """An owner is one printable line: a newline or ESC in it is a malformed freeze file."""
    with pytest.raises(ValidationError, match="owner"):
        entry(owner="@alice\n\x1b[2Jaccepted")


def test_accept_time_reasons_name_lapsed_missing_and_ownerless_freezes():
    """At accept's time, each excused (frozen, not passing) property whose freeze expired since the run, is
    gone from the file or has no owner is one reason; a frozen property that passed needs no excuse."""
    live = entry(freeze_id="live", properties=("rate",))
    lapsed = entry(freeze_id="lapsed", properties=("shape",), expires=NOW + timedelta(hours=1))
    ownerless = entry(freeze_id="nobody", properties=("rate2",), owner="")
    file = FreezeFile(freezes=(live, lapsed, ownerless))
    frozen = {"rate": "live", "shape": "lapsed", "rate2": "nobody", "gone": "deleted", "fine": "lapsed"}
    later = NOW + timedelta(hours=2)
    reasons = dependent_freeze_reasons(file, frozen=frozen, excused=["rate", "shape", "rate2", "gone"], now=later)
    assert reasons == [
        "property gone's vote depends on freeze deleted, which the freeze file does not hold",
        "property rate2's vote depends on freeze nobody, which has no owner",
        f"property shape's vote depends on freeze lapsed, which expired at {lapsed.expires_at.isoformat()} "
        f"(accept ran at {later.isoformat()})",
    ]
    assert dependent_freeze_reasons(file, frozen=frozen, excused=["rate"], now=later) == []
    assert dependent_freeze_reasons(None, frozen={}, excused=["rate"], now=later) == []
