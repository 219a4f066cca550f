"""A trial's side (the patched tree or, for a paired property, the base's) is part of its identity: specs,
observations, the journal, the tally and the wave loop keep a base trial and the patch trial of the same
index apart, and an answer offered for the other side is never counted for it."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from gate.core.card.card import HarnessEvent
from gate.core.card.evidence import TrialRecord, record_bytes
from gate.core.errors import JournalError
from gate.core.suite.fold import Tally, fold_tallies
from gate.core.suite.journal import JournalHeader, chained, check_trials, header_line, parse_lines, trial_line
from gate.core.suite.plan import Planner
from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import ClockSpec, Observation, Side, TrialSpec
from gate.core.testing import FROZEN_AT, make_spec
from gate.core.verdicts.verdict import Kind, Outcome, OutcomeKind
from gate.io.snapshot import LocalInputs
from gate.run.executors.mock import MockExecutor
from gate.run.waves import run_waves

PAIRED = PropertySpec.model_validate(
    {"id": "p", "band": "statistical", "fixture": "f.json", "check": "checks:c", "rule": "paired", "margin": 0.05,
     "max_pairs": 100, "wave": 10}
)  # fmt: skip
BAND = PropertySpec.model_validate({"id": "q", "band": "statistical", "fixture": "f.json", "check": "checks:c"})
HEADER = JournalHeader(
    run_id="r", suite="s", checks="", tree="t", seal="f", image="i", image_id="sha256:mock", properties=("p",)
)


def base_of(spec: TrialSpec) -> TrialSpec:
    return spec.model_copy(update={"side": Side.BASE, "tree_digest": "b", "canary": "other"})


def test_a_base_trial_and_the_patch_trial_of_its_index_are_two_trials_with_one_seed() -> None:
    """Same run, property, index and seed, other side: the keys differ, and each observation names its own."""
    patch = make_spec(4)
    base = base_of(patch)
    assert patch.seed == base.seed and patch.key != base.key
    assert Observation.of(base).key == base.key != Observation.of(patch).key
    assert Observation.of(base).side is Side.BASE


def test_a_patch_trial_dumps_as_before_sides_and_a_base_trial_names_its_side() -> None:
    """No `side` in a patch trial's JSON (stored digests keep their bytes); a base trial's names it, reads back."""
    patch = make_spec(1)
    assert "side" not in patch.model_dump(mode="json") and "side" not in Observation.of(patch).model_dump()
    base = Observation.of(base_of(patch))
    assert json.loads(base.model_dump_json())["side"] == "base"
    assert Observation.model_validate_json(base.model_dump_json()) == base
    outcome = Outcome(trial_index=1, kind=OutcomeKind.HIT)
    records = [
        TrialRecord(property_id="p", trial_index=1, observation=o, outcome=outcome) for o in (base, patch_obs(1))
    ]
    assert records[0].side is Side.BASE and record_bytes(records[0]) != record_bytes(records[1])


def patch_obs(index: int) -> Observation:
    return Observation.of(make_spec(index))


def test_the_tally_refuses_an_observation_offered_for_the_other_side() -> None:
    """A base observation is not the patch's, a patch one not the base's, and an unpaired property has no base."""
    hit = Outcome(trial_index=0, kind=OutcomeKind.HIT)
    base = Observation.of(base_of(make_spec(0)))
    with pytest.raises(ValueError, match="not the patch's"):
        Tally(PAIRED).add(base, hit)
    with pytest.raises(ValueError, match="not a paired property's base trial"):
        Tally(PAIRED).add_base(patch_obs(0), hit)
    with pytest.raises(ValueError, match="not a paired property's base trial"):
        Tally(BAND).add_base(base.model_copy(update={"property_id": "q"}), hit)


def test_the_journal_keys_a_base_trial_by_its_side_and_refuses_a_relabelled_one() -> None:
    """A stored base trial comes back under its side; a line whose observation names the other side is refused."""
    spec = base_of(make_spec(2))
    lines = [header_line(HEADER)]
    lines.append(trial_line(lines[-1]["chain"], spec, Observation.of(spec, exit_code=0)))
    journal = parse_lines(json.loads(json.dumps(lines)))
    assert list(journal.stored) == [("r", "p", 2, Side.BASE)]
    asked: list[Side] = []
    check_trials(journal, lambda p, i, c, s: asked.append(s) or spec)
    assert asked == [Side.BASE]
    relabelled = [header_line(HEADER)]
    relabelled.append(trial_line(relabelled[-1]["chain"], spec, Observation.of(make_spec(2), exit_code=0)))
    with pytest.raises(JournalError, match="line 2: the observation is of"):
        parse_lines(json.loads(json.dumps(relabelled)))
    forged = dict(lines[1], side="patch")
    forged.pop("chain")
    with pytest.raises(JournalError, match="is not 'base'"):
        parse_lines([lines[0], {**forged, "chain": chained(lines[0]["chain"], forged)}])


class _Fixtures:
    """Inputs that serve the one fixture the mock executor reads."""

    def fixture_bytes(self, digest: str) -> bytes:
        return b"{}"


def _waves(answer: Any) -> tuple[list[Tally], list[HarnessEvent]]:
    planner = Planner("r", ("python3", "probe.py"), "t", {"f.json": "f"}, ClockSpec(frozen_at=FROZEN_AT))
    base_planner = planner.__class__(**{**planner.__dict__, "tree_digest": "b", "side": Side.BASE})
    events: list[HarnessEvent] = []
    tallies = run_waves(
        MockExecutor(answer),
        [PAIRED],
        planner=planner,
        base_planner=base_planner,
        inputs=cast(LocalInputs, _Fixtures()),
        judge=lambda prop, obs: Outcome(
            trial_index=obs.trial_index, kind=OutcomeKind.HIT if obs.exit_code == 0 else OutcomeKind.MISS
        ),
        events=events,
    )
    return tallies, events


def test_a_wave_sends_each_index_on_both_trees_with_one_seed() -> None:
    """A paired wave holds base and patch specs of the same indices, same seed, each on its own tree."""
    sent: list[TrialSpec] = []

    def answer(spec: TrialSpec, fixture: bytes) -> Observation:
        sent.append(spec)
        return Observation.of(spec, exit_code=0)

    [tally], events = _waves(answer)
    first = sent[:20]
    assert [(s.trial_index, s.side) for s in first[:4]] == [
        (0, Side.BASE),
        (0, Side.PATCH),
        (1, Side.BASE),
        (1, Side.PATCH),
    ]
    assert {s.tree_digest for s in first if s.side is Side.BASE} == {"b"}
    assert {s.tree_digest for s in first if s.side is Side.PATCH} == {"t"}
    assert all(first[i].seed == first[i + 1].seed for i in range(0, 20, 2))
    assert len(tally.base_outcomes) == len(tally.outcomes) == tally.dispatched and not events


@pytest.mark.parametrize("lying", [Side.BASE, Side.PATCH])
def test_an_answer_relabelled_as_the_other_side_is_never_counted_for_it(lying: Side) -> None:
    """An answer labelled with the other side counts only under the key it names (its first answer there): the
    side it was sent for stays unreported, so no pair forms and the row is a harness_error, never a pass."""

    def answer(spec: TrialSpec, fixture: bytes) -> Observation:
        other = Side.PATCH if spec.side is Side.BASE else Side.BASE
        return Observation.of(spec, exit_code=0).model_copy(update={"side": other} if spec.side is lying else {})

    [tally], events = _waves(answer)
    assert tally.dispatched == 10
    held = tally.outcomes if lying is Side.BASE else tally.base_outcomes
    assert len(held) == 10  # the honest side's own answers, each counted once
    assert len(tally.outcomes) + len(tally.base_outcomes) == 10
    assert {e.kind for e in events} == {"duplicate_result"}
    [verdict] = fold_tallies([tally], {"f.json": "f"}, calibrated=frozenset()).verdicts
    assert verdict.kind is Kind.HARNESS_ERROR and "never reported" in verdict.detail
    assert verdict.paired is not None and verdict.paired.pairs.pairs == 0


def test_a_base_answer_for_a_property_that_runs_no_base_side_is_a_stray() -> None:
    """A base-labelled answer for an unpaired property's trial is ignored with a stray_result event."""
    planner = Planner("r", ("python3", "probe.py"), "t", {"f.json": "f"}, ClockSpec(frozen_at=FROZEN_AT))
    events: list[HarnessEvent] = []
    [tally] = run_waves(
        MockExecutor(lambda spec, _: Observation.of(spec, exit_code=0).model_copy(update={"side": Side.BASE})),
        [BAND],
        planner=planner,
        inputs=cast(LocalInputs, _Fixtures()),
        judge=lambda prop, obs: Outcome(trial_index=obs.trial_index, kind=OutcomeKind.HIT),
        events=events,
    )
    assert not tally.outcomes and not tally.base_outcomes
    assert {e.kind for e in events} == {"stray_result"} and "base trial" in events[0].detail
