"""A safety or contract property run more than once (`repeat`) whose trials disagree on identical sealed
bytes: the row keeps the kind its misses earn and is marked as having changed colour, naming the trials."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from support.mini_suite import CONTRACT, Suite, build_suite, but, good, run, stdout

from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import Observation
from gate.core.verdicts.verdict import Band, ColourChange, Kind, Outcome, OutcomeKind, fold

HIT, MISS = OutcomeKind.HIT, OutcomeKind.MISS


def outcomes(*kinds: OutcomeKind) -> list[Outcome]:
    return [
        Outcome(trial_index=i, kind=k, detail="" if k is HIT else f"total {i} != 12.10") for i, k in enumerate(kinds)
    ]


def contract(*kinds: OutcomeKind):
    return fold(property_id="c", band=Band.CONTRACT, fixture_digest="d" * 64, outcomes=outcomes(*kinds))


def test_disagreeing_contract_trials_keep_fail_contract_and_name_both_sides() -> None:
    """Hits at 0 and 2, misses at 1 and 3: fail_contract by the first miss, and the colour change listed."""
    verdict = contract(HIT, MISS, HIT, MISS)
    assert verdict.kind is Kind.FAIL_CONTRACT
    assert verdict.colour_change == ColourChange(hits=(0, 2), misses=(1, 3))
    assert verdict.detail == (
        "trial 1: total 1 != 12.10 (+1 more); "
        "changed colour on identical bytes: hits at trials 0, 2; misses at trials 1, 3"
    )


@pytest.mark.parametrize("kinds", [(HIT, HIT, HIT), (MISS, MISS), (HIT,), (HIT, OutcomeKind.TIMEOUT)])
def test_agreeing_trials_or_a_timeout_are_no_colour_change(kinds: tuple[OutcomeKind, ...]) -> None:
    """All hits, all misses, one trial, or a hit beside a timeout: no colour change is claimed."""
    assert contract(*kinds).colour_change is None


def test_a_statistical_property_never_changes_colour() -> None:
    """A statistical property's trials differ by design: its hits and misses are a rate, not a flicker."""
    assert ColourChange.of(Band.STATISTICAL, outcomes(HIT, MISS)) is None


def test_a_long_flicker_lists_ten_indices_a_side_and_counts_the_rest() -> None:
    """Past ten trials a side, the line says how many more, so a detail stays short."""
    change = ColourChange(hits=tuple(range(0, 30, 2)), misses=(1,))
    assert change.line().endswith("18 and 5 more; misses at trials 1")


def test_repeat_is_for_safety_and_contract_only() -> None:
    """`repeat` plans that many trials of a contract property; on a statistical one it is refused."""
    spec = PropertySpec(id="c", band=Band.CONTRACT, fixture="f.json", check="checks:c", repeat=5)
    assert spec.planned_trials() == 5
    with pytest.raises(ValidationError, match="repeat applies to safety and contract"):
        PropertySpec(id="s", band=Band.STATISTICAL, fixture="f.json", check="checks:s", repeat=5)


def test_a_run_marks_a_flickering_contract_row_on_the_card(tmp_path) -> None:
    """`repeat = 4` on the contract property and a probe right on even trials only: the card's row is
    fail_contract with its colour change, and the job is blocked."""
    suite: Suite = build_suite(tmp_path)
    toml = suite.request.suite
    toml.write_text(
        toml.read_text().replace('check = "checks:invoice_total"\n', 'check = "checks:invoice_total"\nrepeat = 4\n')
    )

    def flicker(spec, fixture) -> Observation:
        if spec.trial_index % 2 == 0:
            return good(spec, fixture)
        return Observation.of(spec, exit_code=0, image_id="sha256:mock", stdout=stdout({"total": "0"}))

    result, _ = run(suite, but(CONTRACT, flicker))
    row = next(r for r in result.card.properties if r.id == CONTRACT)
    assert (row.kind, row.trials, row.hits) == (Kind.FAIL_CONTRACT, 4, 2)
    assert row.colour_change == ColourChange(hits=(0, 2), misses=(1, 3))
    assert result.card.exit_code == 1
    assert json.loads(suite.card.read_text())["properties"][1]["colour_change"] == {"hits": [0, 2], "misses": [1, 3]}
