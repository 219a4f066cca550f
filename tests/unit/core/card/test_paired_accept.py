"""`accept` recomputes a paired row: its kind and its test's state from the pair counts the card
records, whatever the card claims."""

from __future__ import annotations

from pathlib import Path

from support.mini_suite import STAT

from gate.core.card.acceptance import prove
from gate.core.verdicts.paired import PairCounts, PairedRule, PairedState
from gate.core.verdicts.verdict import Kind, OutcomeCounts, PairedEvidence
from unit.core.card.test_acceptance import card_of, refused, with_row

RULE = PairedRule(margin=0.05, max_pairs=400)
WORSE = PairCounts(both_pass=85, base_only=10, both_fail=5)  # base .95, patch .85 over 100 pairs
EQUAL = PairCounts(both_pass=55, both_fail=5)


def paired_row(tmp_path: Path, pairs: PairCounts, *, kind: Kind, state: PairedState, **fields):
    """The honest run's card with its statistical row replaced by a paired row of these pair counts,
    claiming `kind` and `state` (the rest of the card is the run's: it voted that row a pass)."""
    card, args = card_of(tmp_path)
    index = next(i for i, row in enumerate(card.properties) if row.id == STAT)
    assert card.properties[index].kind is Kind.PASS
    patch = OutcomeCounts(hit=pairs.both_pass + pairs.patch_only, miss=pairs.both_fail + pairs.base_only)
    base = OutcomeCounts(hit=pairs.both_pass + pairs.base_only, miss=pairs.both_fail + pairs.patch_only)
    update = {
        "rule": RULE.model_dump(),
        "counts": patch,
        "trials": patch.trials,
        "hits": patch.hit,
        "kind": kind,
        "paired": PairedEvidence(base=base, pairs=pairs, state=state),
        **fields,
    }
    return with_row(card, index, **update), args, index


def test_an_honest_passing_paired_row_is_accepted(tmp_path: Path) -> None:
    """Pair counts that pass, recorded as a pass, are accepted."""
    card, args, _ = paired_row(tmp_path, EQUAL, kind=Kind.PASS, state=PairedState.PASS)
    result = prove(card, **args)
    assert result.accepted, result.reasons


def test_a_card_claiming_pass_for_worse_pair_counts_is_refused(tmp_path: Path) -> None:
    """A row claiming pass (kind and state) for pair counts that decide worse is refused by accept's recomputation."""
    assert RULE.state(WORSE) is PairedState.WORSE
    card, args, index = paired_row(tmp_path, WORSE, kind=Kind.PASS, state=PairedState.PASS)
    refused(card, args, f"properties[{index}] ({STAT}): paired.state is pass but its pair counts give worse")


def test_an_honest_state_with_a_forged_kind_is_refused(tmp_path: Path) -> None:
    """The worse state recorded honestly but the kind flipped to pass: the kind the counts give wins."""
    card, args, index = paired_row(tmp_path, WORSE, kind=Kind.PASS, state=PairedState.WORSE)
    refused(card, args, f"properties[{index}] ({STAT}).kind is pass but its counts give inconclusive_sample")


def test_pair_counts_that_do_not_match_the_trials_are_refused(tmp_path: Path) -> None:
    """Passing pair counts beside patch trial counts they cannot come from are refused."""
    card, args, _ = paired_row(
        tmp_path, EQUAL, kind=Kind.PASS, state=PairedState.PASS, counts=OutcomeCounts(hit=50, miss=10), hits=50
    )
    refused(card, args, "pair counts do not add up: patch hits 50 but the pairs give 55")


def test_a_paired_rule_without_pair_counts_is_refused(tmp_path: Path) -> None:
    """A paired rule's row must carry its pairs."""
    card, args, _ = paired_row(tmp_path, EQUAL, kind=Kind.PASS, state=PairedState.PASS, paired=None)
    refused(card, args, "a paired rule's row has no pair counts")


def test_pair_counts_on_another_rules_row_are_refused(tmp_path: Path) -> None:
    """No other rule's row may carry pair counts."""
    card, args = card_of(tmp_path)
    index = next(i for i, row in enumerate(card.properties) if row.id == STAT)
    forged = with_row(card, index, paired=PairedEvidence(pairs=EQUAL, state=PairedState.PASS))
    refused(forged, args, "pair counts on a row whose rule is not paired")
