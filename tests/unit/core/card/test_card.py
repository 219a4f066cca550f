"""gate.card: the verdict card model and `accept`, which re-derives from it whether a patch may merge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gate.core.card.card import FixtureBinding, HarnessEvent, PropertyRow, VerdictCard, accept
from gate.core.policy.ledger import LedgerAction, LedgerEntry
from gate.core.policy.policy import JobStatus
from gate.core.suite.trial import ClockSpec
from gate.core.verdicts.bands import wilson
from gate.core.verdicts.verdict import Band, Kind

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SEAL = "c" * 64


def row(pid="shape", band=Band.CONTRACT, kind=Kind.PASS, voting=True, **kw):
    return PropertyRow(
        id=pid,
        band=band,
        kind=kind,
        voting=voting,
        trials=kw.pop("trials", 1),
        hits=kw.pop("hits", 1),
        deadline_s=2.0,
        fixture="inv.json",
        fixture_digest="d" * 64,
        **kw,
    )


def clean_rows():
    return (
        row("safe", Band.SAFETY),
        row("shape", Band.CONTRACT),
        row(
            "rate",
            Band.STATISTICAL,
            trials=10,
            hits=9,
            interval=wilson(9, 10),
            rule={"rule": "fixed", "trials": 10, "min_hits": 8},
        ),
    )


def card(**changes):
    base = dict(
        gate_version="0.1.0",
        run_id="run-1",
        created_at=NOW,
        suite="/s/gate.toml",
        suite_sha256="e" * 64,
        workdir="/w",
        tree_digest="t" * 64,
        fixture=FixtureBinding(root="/s/fixtures", seal=SEAL, manifest={"inv.json": "d" * 64}),
        image="probegate-sandbox:1",
        image_id="sha256:" + "1" * 64,
        clock=ClockSpec(frozen_at=datetime(2026, 3, 1, tzinfo=UTC)),
        unenrolled_workers=False,
        seeds_from=None,
        retry_count=0,
        properties=clean_rows(),
        status=JobStatus.ACCEPTED,
        exit_code=0,
    )
    base.update(changes)
    return VerdictCard(**base)


def reasons(c, seal=SEAL):
    result = accept(c, seal)
    assert not result.accepted
    return result.reasons


def test_clean_card_is_accepted():
    """A zero-retry, sealed, oracle-clean card whose voting rows all pass is accepted."""
    result = accept(card(), SEAL)
    assert result.accepted
    assert result.reasons == ("every voting property passed",)


def test_retry_count_nonzero_is_rejected():
    """A card recording a retry is rejected; the gate accepts first runs only."""
    assert reasons(card(retry_count=1)) == ("retry_count is 1; the gate accepts first runs only",)


def test_negative_retry_count_cannot_be_carded():
    """A card cannot record a negative retry count."""
    with pytest.raises(ValidationError):
        card(retry_count=-1)


def test_seal_mismatch_is_rejected():
    """A card whose fixture seal differs from the seal file is rejected, naming both prefixes."""
    got = reasons(card(), seal="f" * 64)
    assert got == (f"card seal {SEAL[:16]} does not match seal file {'f' * 16}",)


def test_oracle_edits_are_rejected():
    """A patch that touched oracle files is rejected, with the files named."""
    got = reasons(card(new_oracle_edits=("gate.toml", "flake-freeze.json")))
    assert got == ("the patch edits oracle files: gate.toml, flake-freeze.json",)


def test_open_network_is_rejected():
    """A run whose probes had a network is rejected."""
    assert reasons(card(network_mode="bridge")) == ("probes ran with network_mode 'bridge'",)


@pytest.mark.parametrize(
    ("status", "code"), [(JobStatus.BLOCKED, 1), (JobStatus.HARNESS_BROKEN, 2), (JobStatus.SAMPLER_BUDGET_EXCEEDED, 3)]
)
def test_nonzero_exit_code_is_rejected(status, code):
    """A card whose job did not exit 0 is rejected, naming the status and code."""
    assert f"the job ended {status} (exit {code})" in reasons(card(status=status, exit_code=code))


@pytest.mark.parametrize("kind", [k for k in Kind if k is not Kind.PASS])
def test_non_pass_voting_row_is_rejected(kind):
    """Any voting row whose kind is not pass rejects the card, naming the row and its detail."""
    rows = (row("safe", Band.SAFETY), row("shape", Band.CONTRACT, kind=kind, detail="why"))
    assert reasons(card(properties=rows, status=JobStatus.INCONCLUSIVE)) == (f"shape: {kind} (why)",)


def test_non_pass_voting_row_without_detail_has_no_parentheses():
    """A failing row without detail is named without an empty '()'."""
    rows = (row("shape", Band.CONTRACT, kind=Kind.INCONCLUSIVE_TIMEOUT),)
    assert reasons(card(properties=rows)) == ("shape: inconclusive_timeout",)


@pytest.mark.parametrize("frozen_by", [None, "fz-1"])
def test_non_voting_safety_row_is_rejected(frozen_by):
    """A safety row that did not vote is rejected even if a freeze claims it (safety is never frozen)."""
    rows = (row("safe", Band.SAFETY, voting=False, frozen_by=frozen_by), row("shape"))
    got = reasons(card(properties=rows, freeze_set={"safe": "fz-1"} if frozen_by else {}))
    assert got == ("safe: safety property did not vote; safety can never be frozen",)


def test_unjustified_non_voting_row_is_rejected():
    """A non-safety row that abstained without a freeze or a harness credit is rejected."""
    rows = (row("safe", Band.SAFETY), row("shape", voting=False, kind=Kind.FAIL_CONTRACT))
    assert reasons(card(properties=rows)) == ("shape: did not vote without a freeze or a harness credit",)


def test_frozen_row_in_the_freeze_set_is_justified():
    """A non-voting row frozen by an id the card's freeze set records is justified."""
    rows = (
        row("safe", Band.SAFETY),
        row("rate", Band.STATISTICAL, kind=Kind.INCONCLUSIVE_SAMPLE, voting=False, frozen_by="fz-1"),
    )
    assert accept(card(properties=rows, freeze_set={"rate": "fz-1"}), SEAL).accepted


@pytest.mark.parametrize("freeze_set", [{}, {"rate": "fz-2"}, {"other": "fz-1"}])
def test_frozen_row_not_matching_the_freeze_set_is_rejected(freeze_set):
    """A row frozen by an id the card's freeze set does not record for it is rejected."""
    rows = (row("safe", Band.SAFETY), row("rate", Band.STATISTICAL, voting=False, frozen_by="fz-1"))
    got = reasons(card(properties=rows, freeze_set=freeze_set))
    assert got == ("rate: frozen by fz-1, which is not in the card's freeze set",)


@pytest.mark.parametrize("action", [LedgerAction.OPENED, LedgerAction.CONSUMED])
def test_credited_harness_error_row_is_justified(action):
    """A non-voting harness_error row whose ledger action spent a credit is justified."""
    rows = (row("safe", Band.SAFETY), row("shape", kind=Kind.HARNESS_ERROR, voting=False, ledger=action))
    assert accept(card(properties=rows), SEAL).accepted


def test_exhausted_harness_error_row_that_abstained_is_rejected():
    """A non-voting harness_error whose ledger action is exhausted (no credit spent) is rejected."""
    rows = (
        row("safe", Band.SAFETY),
        row("shape", kind=Kind.HARNESS_ERROR, voting=False, ledger=LedgerAction.EXHAUSTED),
    )
    assert reasons(card(properties=rows)) == ("shape: did not vote without a freeze or a harness credit",)


def test_credit_on_a_non_harness_row_does_not_justify_abstaining():
    """A ledger action on a row that is not a harness_error does not justify its abstention."""
    rows = (row("safe", Band.SAFETY), row("shape", kind=Kind.FAIL_CONTRACT, voting=False, ledger=LedgerAction.OPENED))
    assert "did not vote without a freeze or a harness credit" in reasons(card(properties=rows))[0]


def test_zero_voting_rows_is_rejected():
    """A card on which every row abstained (even justifiably) is rejected: no property voted."""
    rows = (row("shape", kind=Kind.HARNESS_ERROR, voting=False, ledger=LedgerAction.OPENED),)
    assert reasons(card(properties=rows, status=JobStatus.INCONCLUSIVE)) == ("no property voted",)


def test_no_rows_is_rejected():
    """A card without property rows is rejected."""
    assert reasons(card(properties=())) == ("the card has no property rows",)


def test_every_problem_is_reported():
    """accept reports every failed condition, not only the first."""
    c = card(
        retry_count=2,
        new_oracle_edits=("checks.py",),
        status=JobStatus.BLOCKED,
        exit_code=1,
        properties=(row("shape", kind=Kind.FAIL_CONTRACT),),
    )
    assert len(reasons(c, seal="0" * 64)) == 5


# --- hypothesis: accept is exactly its stated conjunction -----------------------------------------

row_st = st.builds(
    row,
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(list(Band)),
    st.sampled_from(list(Kind)),
    st.booleans(),
    frozen_by=st.sampled_from([None, "fz-1"]),
    ledger=st.sampled_from([None, *LedgerAction]),
)


@given(
    st.lists(row_st, max_size=4),
    st.integers(0, 2),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0, 1, 2, 3]),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["fz-1", "fz-2"])),
)
def test_accept_is_exactly_the_documented_conjunction(rows, retries, seal_ok, edits, code, freeze_set):
    """accept holds exactly when retries are 0, the seal matches, no oracle edits, exit 0 and every row is sound."""
    c = card(
        properties=tuple(rows),
        retry_count=retries,
        new_oracle_edits=("x",) if edits else (),
        exit_code=code,
        freeze_set=freeze_set,
    )

    def row_ok(r):
        if r.voting:
            return r.kind is Kind.PASS
        if r.band is Band.SAFETY:
            return False
        if r.frozen_by is not None:
            return freeze_set.get(r.id) == r.frozen_by
        return r.kind is Kind.HARNESS_ERROR and r.ledger in (LedgerAction.OPENED, LedgerAction.CONSUMED)

    expected = (
        retries == 0
        and seal_ok
        and not edits
        and code == 0
        and bool(rows)
        and all(map(row_ok, rows))
        and any(r.voting for r in rows)
    )
    assert accept(c, SEAL if seal_ok else "0" * 64).accepted is expected


# --- the model --------------------------------------------------------------------------------------


def test_card_json_round_trips():
    """A fully populated card dumped to JSON validates back to an equal card."""
    c = card(
        base_rev="abc123",
        freeze_set={"rate": "fz-1"},
        freezes_inactive={"fz-0": "expired at 2026-02-01T00:00:00+00:00"},
        properties=(
            *clean_rows()[:2],
            row(
                "rate",
                Band.STATISTICAL,
                kind=Kind.INCONCLUSIVE_SAMPLE,
                voting=False,
                frozen_by="fz-1",
                interval=wilson(3, 10),
                durations_s=(0.02, 0.03),
            ),
        ),
        ledger_actions=(
            LedgerEntry(
                property_id="shape",
                action=LedgerAction.OPENED,
                remaining=1,
                expires_at=NOW + timedelta(hours=6),
                detail="daemon gone",
            ),
        ),
        harness_events=(HarnessEvent(kind="duplicate_result", detail="trial 3 reported twice", property_id="rate"),),
        reasons=("a", "b"),
    )
    again = VerdictCard.model_validate_json(c.model_dump_json())
    assert again == c
    assert accept(again, SEAL) == accept(c, SEAL)


def test_card_refuses_unknown_fields():
    """A card with an undeclared field is refused (the schema is closed)."""
    data = card().model_dump(mode="json")
    data["retries_hidden"] = 3
    with pytest.raises(ValidationError):
        VerdictCard.model_validate(data)


@pytest.mark.parametrize("version", [1, 3])
def test_card_refuses_another_schema_version(version):
    """A card claiming a schema version other than 2 (an older one lacks what accept recomputes) is refused."""
    data = card().model_dump(mode="json")
    data["schema_version"] = version
    with pytest.raises(ValidationError):
        VerdictCard.model_validate(data)


def test_card_refuses_an_unknown_row_kind():
    """A row whose kind is not one of the six is refused."""
    data = card().model_dump(mode="json")
    data["properties"][0]["kind"] = "flaky"
    with pytest.raises(ValidationError):
        VerdictCard.model_validate(data)


def test_card_is_frozen():
    """A card cannot be edited in place after it is built."""
    c = card()
    with pytest.raises(ValidationError):
        c.retry_count = 1  # type: ignore[misc]


def test_card_defaults_network_none_and_no_edits():
    """A card built without those fields records network none, no oracle edits and no freezes."""
    c = card()
    assert (c.network_mode, c.new_oracle_edits, c.freeze_set, c.schema_version) == ("none", (), {}, 2)
