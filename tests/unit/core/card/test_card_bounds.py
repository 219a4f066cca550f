"""Values a card parses but no run writes (issue 26): each is refused where the card is read, as one
ConfigError naming the field, or read and used without a crash: non-finite or huge numbers, a
negative budget, a naive `created_at`, a date at the end of time with a credited row, and a clock
zone of hundreds of parts (also in a fixture tree's clock.json)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gate.core.card.acceptance import AcceptFacts, decide_merge, recomputed_reasons
from gate.core.card.card import VerdictCard
from gate.core.card.carddiff import diff_cards
from gate.core.errors import RET_CONFIG, ConfigError
from gate.core.policy.freezes import FreezeEntry, FreezeFile
from gate.core.policy.ledger import END_OF_TIME, Ledger, LedgerAction
from gate.core.report.html import render_html
from gate.core.report.junit import render_junit
from gate.core.report.markdown import render_markdown
from gate.core.verdicts.verdict import Band, Kind, OutcomeCounts
from gate.io.artifacts import parse_card
from gate.io.fixtures import read_clock

SEAL = "c" * 64


def text_with(card: VerdictCard, field: str, raw: str) -> bytes:
    """The card's JSON with one top-level or `policy.`/`properties.N.` field set to the raw JSON text."""
    document = card.model_dump(mode="json")
    holder, *path = field.split(".")
    target: dict = document
    keys = [holder, *path]
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[keys[-1]] = "\x00MARK\x00"
    return json.dumps(document).replace(json.dumps("\x00MARK\x00"), raw).encode()


@pytest.mark.parametrize(
    ("field", "raw"),
    [
        ("policy.ledger_ttl_s", "1e300"),
        ("policy.ledger_ttl_s", "Infinity"),
        ("policy.ledger_ttl_s", "NaN"),
        ("policy.ledger_ttl_s", "-1"),
        ("policy.ledger_ttl_s", "1e12"),  # finite, but no suite grants a slot that long
        ("policy.ledger_budget", "-1"),
        ("policy.ledger_budget", "1000"),
        ("policy.max_fault_share", "NaN"),
        ("properties.2.hits", "1" + "0" * 400),
        ("properties.2.trials", "-" + "9" * 400),
        ("properties.2.deadline_s", "Infinity"),
        ("properties.2.durations_s", "[1e308, 1e308]"),
        ("created_at", '"2026-03-01T00:00:00"'),
        ("clock.zone", json.dumps("/".join(["a"] * 400))),
        ("clock.zone", json.dumps("/".join(["a"] * 200))),
    ],
)
def test_values_no_run_writes_are_refused_naming_the_field(card: VerdictCard, field: str, raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_card(text_with(card, field, raw), Path("card.json"))
    text = str(info.value)
    assert info.value.exit_code == RET_CONFIG
    assert text.startswith("card.json: ") and len(text.splitlines()) == 1 and text.isprintable()
    assert info.value.field is not None and info.value.field.startswith(field), text


def test_the_end_of_time_with_a_credited_row_is_read(card: VerdictCard) -> None:
    """created_at 9999-12-31T23:59:59Z and a credited harness_error: accept recomputes the decision
    (its credit's expiry saturates at the end of datetime's range) instead of overflowing."""
    rows = list(card.properties)
    stat = next(i for i, row in enumerate(rows) if row.band is Band.STATISTICAL)
    counts = OutcomeCounts(fault=1, fault_creditable=1)
    rows[stat] = rows[stat].model_copy(
        update={"kind": Kind.HARNESS_ERROR, "counts": counts, "trials": 1, "hits": 0, "voting": False,
                "ledger": LedgerAction.OPENED, "interval": None}
    )  # fmt: skip
    end = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    edited = card.model_copy(update={"properties": tuple(rows), "created_at": end})
    parsed = parse_card(edited.model_dump_json().encode(), Path("card.json"))
    assert all("Overflow" not in reason for reason in recomputed_reasons(parsed))
    ledger, entry = Ledger().draw("p", "fault", end)
    assert entry.expires_at == END_OF_TIME and ledger.credits["p"].expires_at == END_OF_TIME


def test_a_naive_date_never_meets_a_freeze(card: VerdictCard) -> None:
    """A naive created_at is refused at read, so accept's freeze resolution (aware expiries) never sees it."""
    with pytest.raises(ConfigError, match="created_at"):
        parse_card(text_with(card, "created_at", '"2026-03-01T00:00:00"'), Path("card.json"))
    stat = next(row.id for row in card.properties if row.band is Band.STATISTICAL)
    freezes = FreezeFile(
        freezes=(
            FreezeEntry(freeze_id="f1", properties=(stat,), seal=card.fixture.seal, reason="flaked",
                        expires_at=datetime(2099, 1, 1, tzinfo=UTC), owner="someone"),
        )
    )  # fmt: skip
    facts = AcceptFacts(
        seal_digest=card.fixture.seal,
        tree_digest=card.tree_digest,
        suite_sha256=card.suite_sha256,
        bands={row.id: row.band for row in card.properties},
        freeze_file=freezes,
        base_commit=None,
        oracle_edits=(),
        now=datetime(2026, 12, 4, tzinfo=UTC),
        allow_unchecked_oracle=True,
    )
    assert decide_merge(card, facts).reasons  # runs to a decision, aware on both sides


def test_readers_of_the_largest_numbers_a_card_may_hold(card: VerdictCard) -> None:
    """At the bound (2**53 hits, durations of 2**53 s) diff and every report still render."""
    rows = list(card.properties)
    rows[-1] = rows[-1].model_copy(update={"hits": 2**53, "trials": 1, "durations_s": (2.0**53, 2.0**53)})
    big = card.model_copy(update={"properties": tuple(rows)})
    parsed = parse_card(big.model_dump_json().encode(), Path("card.json"))
    diff_cards(card, parsed).to_text()
    diff_cards(parsed, card).to_json()
    render_html(parsed)
    render_junit(parsed)
    render_markdown(parsed)


def test_clock_file_with_a_zone_of_400_parts_is_refused(tmp_path: Path) -> None:
    zone = "/".join(["a"] * 400)
    (tmp_path / "clock.json").write_text(json.dumps({"frozen_at": "2026-03-01T00:00:00Z", "zone": zone}))
    with pytest.raises(ConfigError, match="IANA") as info:
        read_clock(tmp_path)
    assert len(str(info.value)) < 300


def test_a_ledger_no_suite_grants_is_refused() -> None:
    with pytest.raises(ValueError):
        Ledger(budget=-1)
    with pytest.raises(ValueError):
        Ledger(ttl=timedelta(days=365 * 1000))
