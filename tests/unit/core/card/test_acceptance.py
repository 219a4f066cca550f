"""gate.core.card.acceptance.prove: accept recomputes instead of believing. Cards come from a real
`run_gate` over a MockExecutor; each test edits one the way a forger would and expects a refusal
that names the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.mini_suite import CONTRACT, SAFETY, STAT, build_suite, but, good, stdout
from support.mini_suite import run as mini_run

from gate.core.card.acceptance import prove
from gate.core.card.card import VerdictCard
from gate.core.policy.ledger import LedgerAction
from gate.core.policy.policy import JobStatus
from gate.core.suite.trial import FaultOrigin, Observation
from gate.core.verdicts.verdict import Band, ColourChange, Kind, OutcomeCounts
from gate.io.suite import load_suite

IMAGE = "sha256:" + "a" * 64


def run(suite, handler):
    """A whole run whose trials ran in IMAGE, a real-looking image ID (the mini suite's `good` names the mock's)."""

    def in_image(spec, fixture: bytes) -> Observation:
        obs = handler(spec, fixture)
        return obs.model_copy(update={"image_id": IMAGE}) if obs.image_id == "sha256:mock" else obs

    return mini_run(suite, in_image, image_id=IMAGE)


def real(spec, fixture: bytes) -> Observation:
    """`good`, from a sandbox with a real-looking image ID."""
    return good(spec, fixture).model_copy(update={"image_id": IMAGE})


def card_of(tmp_path: Path, handler=real) -> tuple[VerdictCard, dict]:
    """A card from a whole run, and the arguments `prove` needs to check it against that run's inputs."""
    suite = build_suite(tmp_path)
    result, _ = run(suite, handler)
    card = result.card.model_copy(update={"image_id": IMAGE, "base_rev": "HEAD~1"})
    loaded = load_suite(suite.request.suite)
    args = {
        "seal_digest": card.fixture.seal,
        "tree_digest": card.tree_digest,
        "suite_sha256": loaded.sha256,
        "bands": loaded.bands(),
    }
    return card, args


def edited(card: VerdictCard, **top) -> VerdictCard:
    """The card with top-level fields replaced, validated again (as a file read back would be)."""
    return VerdictCard.model_validate({**card.model_dump(), **top})


def with_row(card: VerdictCard, index: int, **fields) -> VerdictCard:
    rows = list(card.properties)
    rows[index] = rows[index].model_copy(update=fields)
    return edited(card, properties=tuple(rows))


def refused(card: VerdictCard, args: dict, *needles: str) -> tuple[str, ...]:
    result = prove(card, **args)
    assert not result.accepted, result
    for needle in needles:
        assert any(needle in reason for reason in result.reasons), (needle, result.reasons)
    return result.reasons


def test_an_honest_passing_card_is_accepted(tmp_path: Path) -> None:
    """A card exactly as the run wrote it, for this tree and suite, is accepted."""
    card, args = card_of(tmp_path)
    result = prove(card, **args)
    assert result.accepted, result.reasons


def test_a_flipped_kind_with_a_flipped_status_is_refused(tmp_path: Path) -> None:
    """A failing row turned into a pass, with the job's status and exit code edited to match, is refused
    because the row's outcome counts still give fail_contract."""
    wrong = but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({}), image_id=IMAGE))
    card, args = card_of(tmp_path, wrong)
    assert card.status is JobStatus.BLOCKED
    forged = with_row(card, 1, kind=Kind.PASS, detail="")
    forged = edited(forged, status=JobStatus.ACCEPTED, exit_code=0, reasons=())
    refused(forged, args, "properties[1] (invoice_total).kind is pass but its counts give fail_contract")


def test_a_deleted_failing_row_is_refused(tmp_path: Path) -> None:
    """A card whose failing row was deleted (and status edited) is refused: the suite has that property."""
    wrong = but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({}), image_id=IMAGE))
    card, args = card_of(tmp_path, wrong)
    forged = edited(card, properties=(card.properties[0], card.properties[2]), status=JobStatus.ACCEPTED, exit_code=0)
    refused(forged, args, f"no row for property {CONTRACT}")


def test_a_relabelled_band_is_refused(tmp_path: Path) -> None:
    """A safety row relabelled statistical (which could be frozen) is refused against the suite's bands."""
    card, args = card_of(tmp_path)
    refused(with_row(card, 0, band=Band.CONTRACT), args, f"row {SAFETY} is in band contract but the suite says safety")


def test_edited_hits_are_refused(tmp_path: Path) -> None:
    """Hits raised without the counts behind them are refused, naming trials/hits."""
    six = but(STAT, lambda spec, f: real(spec, f) if spec.trial_index < 6 else real(spec, b'{"expected_tool": "x"}'))
    card, args = card_of(tmp_path, six)
    assert card.properties[2].kind is Kind.INCONCLUSIVE_SAMPLE
    refused(with_row(card, 2, hits=9, kind=Kind.PASS), args, "properties[2] (tool_choice_rate).trials/hits 10/9")


def test_an_edited_ledger_action_is_refused(tmp_path: Path) -> None:
    """An exhausted credit rewritten as opened, with the row made non-voting, is refused by the recomputed ledger."""
    lost = but(
        CONTRACT,
        lambda spec, _: Observation.harness_fault(spec, "daemon gone", origin=FaultOrigin.HARNESS, image_id=IMAGE),
    )
    card, args = card_of(tmp_path, lost)
    assert card.ledger_actions[0].action is LedgerAction.OPENED
    forged = edited(card, ledger_actions=(card.ledger_actions[0].model_copy(update={"remaining": 5}),))
    refused(forged, args, "ledger_actions")


def test_an_edited_sampler_window_is_refused(tmp_path: Path) -> None:
    """A window edited to look clean disagrees with the window the recorded inputs give."""
    card, args = card_of(tmp_path)
    refused(edited(card, window_after=()), args, "window_after")


def test_a_card_replayed_for_another_tree_is_refused(tmp_path: Path) -> None:
    """A card made for one tree is refused for a tree with another digest."""
    card, args = card_of(tmp_path)
    refused(card, {**args, "tree_digest": "f" * 64}, "the card was made for tree")


def test_a_card_for_another_suite_is_refused(tmp_path: Path) -> None:
    """A card made under another suite file is refused."""
    card, args = card_of(tmp_path)
    refused(card, {**args, "suite_sha256": "0" * 64}, "the card was made for suite")


@pytest.mark.parametrize("image_id", ["", "null", "sha256:mock", IMAGE + "," + "sha256:" + "b" * 64])
def test_trials_in_no_real_sandbox_or_two_images_are_refused(tmp_path: Path, image_id: str) -> None:
    """A card whose trials ran in no real image, or in more than one, is refused."""
    card, args = card_of(tmp_path)
    refused(edited(card, image_id=image_id), args, "trials ran in")


def test_an_unchecked_oracle_is_refused_unless_allowed(tmp_path: Path) -> None:
    """A card from a run without --base is refused, unless the caller explicitly allows an unchecked oracle."""
    card, args = card_of(tmp_path)
    unchecked = edited(card, base_rev=None)
    refused(unchecked, args, "oracle edits were not checked")
    assert prove(unchecked, **args, allow_unchecked_oracle=True).accepted


def test_a_card_whose_reasons_were_emptied_is_refused(tmp_path: Path) -> None:
    """Reasons are recomputed too: a blocked card with its reasons removed disagrees with itself."""
    wrong = but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({}), image_id=IMAGE))
    card, args = card_of(tmp_path, wrong)
    refused(edited(card, reasons=()), args, "card disagrees with itself: reasons")


def test_a_freeze_written_into_the_card_is_refused(tmp_path: Path) -> None:
    """A failing row taken out of the vote by a freeze the card made up (not in the freeze file) is refused,
    though the card's own recomputation agrees with it."""

    def wrong(spec, fixture: bytes) -> Observation:
        if spec.property_id == CONTRACT:
            return Observation.of(spec, exit_code=0, stdout=stdout({}), image_id=IMAGE)
        return real(spec, fixture)

    card, args = card_of(tmp_path, wrong)
    forged = with_row(card, 1, voting=False, frozen_by="fz-made-up")
    forged = edited(forged, freeze_set={CONTRACT: "fz-made-up"}, status=JobStatus.ACCEPTED, exit_code=0, reasons=())
    assert prove(forged, **args).accepted  # consistent with itself: only the freeze file can tell
    refused(forged, {**args, "freezes": {}}, "is not what the freeze file gives")


def test_a_card_from_a_selection_is_refused_even_when_every_selected_row_passes(tmp_path: Path) -> None:
    """A card recording a selection is refused by name, though every row it holds passed."""
    card, args = card_of(tmp_path)
    partial = edited(card, properties=card.properties[2:], selection=(STAT,))
    assert all(row.kind is Kind.PASS for row in partial.properties)
    refused(partial, args, f"the card covers a selection of the suite's properties ({STAT}); run the whole suite")


def test_a_selection_recorded_over_every_row_is_still_refused(tmp_path: Path) -> None:
    """A card with every row but a selection field is refused: the field alone marks a partial run."""
    card, args = card_of(tmp_path)
    refused(edited(card, selection=(SAFETY, CONTRACT, STAT)), args, "covers a selection")


def test_a_partial_card_whose_selection_was_removed_by_hand_is_refused(tmp_path: Path) -> None:
    """Deleting the selection field does not make a card with missing rows whole: the missing rows
    themselves show the selection, and each is named."""
    card, args = card_of(tmp_path)
    raw = edited(card, properties=card.properties[1:], selection=(CONTRACT, STAT)).model_dump(mode="json")
    del raw["selection"]
    forged = VerdictCard.model_validate(raw)
    assert forged.selection is None
    refused(
        forged,
        args,
        f"the card covers a selection of the suite's properties ({CONTRACT}, {STAT}); run the whole suite to merge",
        f"the card has no row for property {SAFETY} of the suite",
    )


def test_a_card_written_before_selections_existed_still_reads(tmp_path: Path) -> None:
    """A card without the selection field (written by an older gate) reads back as the whole suite."""
    card, args = card_of(tmp_path)
    raw = card.model_dump(mode="json")
    del raw["selection"]
    old = VerdictCard.model_validate(raw)
    assert old.selection is None
    assert prove(old, **args).accepted


def test_a_card_that_hides_or_invents_a_colour_change_is_refused(tmp_path: Path) -> None:
    """A contract row whose counts hold hits and misses must carry its colour change, with one index per
    counted trial on each side; a card that drops it, pads it or claims one the counts lack is refused."""
    card, args = card_of(tmp_path)
    counts = OutcomeCounts(hit=2, miss=2)
    flicker = with_row(card, 1, kind=Kind.FAIL_CONTRACT, trials=4, hits=2, counts=counts)
    refused(flicker, args, "has hits and misses but no colour_change")
    padded = with_row(flicker, 1, colour_change=ColourChange(hits=(0, 2, 4), misses=(1, 3)))
    refused(padded, args, "colour_change lists 3 hits and 2 misses, its counts 2 and 2")
    invented = with_row(card, 1, colour_change=ColourChange(hits=(0,), misses=(1,)))
    refused(invented, args, "colour_change lists 1 hits and 1 misses, its counts 1 and 0")
    honest = with_row(flicker, 1, colour_change=ColourChange(hits=(0, 2), misses=(1, 3)))
    assert not [r for r in prove(honest, **args).reasons if "colour_change" in r]
