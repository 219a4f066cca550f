"""Trial seeds: the coordinator derives each trial's seed from the run id, property id and trial index,
the wire and the sandbox carry it to the probe unchanged, and a trial that ran with another is no hit."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from support.mini_suite import NOW, RUN_ID, STAT, Suite, build_suite, but, good, run

from gate.cli.accept import run_accept
from gate.cli.main import main
from gate.core.errors import RET_BLOCKED, RET_OK, RET_USAGE
from gate.core.suite.plan import Planner, trial_seed
from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import MAX_SEED, ClockSpec, FaultOrigin, Observation
from gate.core.testing import make_spec, make_specs
from gate.core.verdicts.verdict import Kind
from gate.io.evidence import verified_records
from worker.celery.shared.wire import decode_batch, encode_batch
from worker.host.batchfile import probe_env

ids = st.text(max_size=40)
IMAGE = "sha256:" + "a" * 64


def real(spec, fixture: bytes) -> Observation:
    """`good`, from a sandbox with a real-looking image ID (accept refuses the mock's)."""
    return good(spec, fixture).model_copy(update={"image_id": IMAGE})


def test_a_seed_is_the_documented_hash() -> None:
    """The seed is the first 53 bits of the sha256 of the JSON array [domain, root, property, index]."""
    text = '["probegate/trial-seed/v1","run-1","tool_choice_rate",7]'
    digest = hashlib.sha256(text.encode("ascii")).digest()
    assert trial_seed("run-1", "tool_choice_rate", 7) == int.from_bytes(digest[:8], "big") >> 11


@given(root=ids, prop=ids, index=st.integers(0, 10_000))
def test_seeds_are_bounded_and_each_input_matters(root: str, prop: str, index: int) -> None:
    """Every seed fits 53 bits, and changing the root, the property or the index changes it."""
    seed = trial_seed(root, prop, index)
    assert 0 <= seed <= MAX_SEED and seed == trial_seed(root, prop, index)
    assert len({seed, trial_seed(root + "x", prop, index), trial_seed(root, prop + "x", index)}) == 3
    assert seed != trial_seed(root, prop, index + 1)


def test_json_keeps_the_parts_apart() -> None:
    """Ids that would run together if joined plainly still give different seeds."""
    assert trial_seed("ab", "c", 1) != trial_seed("a", "bc", 1)
    assert trial_seed('a","b', "c", 1) != trial_seed("a", 'b","c', 1)


def test_the_planner_gives_every_trial_its_seed() -> None:
    """Planned specs carry the run id's seeds; `seeds_from` gives another run's seeds to the same trials."""
    prop = PropertySpec(id="rate", band="statistical", fixture="f.json", check="checks:c", trials=10, min_hits=8)
    planner = Planner("run-1", ("python3", "probe.py"), "t", {"f.json": "d"}, ClockSpec(frozen_at=NOW))
    specs = planner.trials(prop, 3, 4)
    assert [s.seed for s in specs] == [trial_seed("run-1", "rate", i) for i in range(3, 7)]
    replayed = Planner(
        "run-2", ("python3", "probe.py"), "t", {"f.json": "d"}, ClockSpec(frozen_at=NOW), seeds_from="run-1"
    )
    assert [s.seed for s in replayed.trials(prop, 3, 4)] == [s.seed for s in specs]
    assert {s.run_id for s in replayed.trials(prop, 3, 4)} == {"run-2"}


def test_the_wire_and_the_sandbox_carry_each_seed() -> None:
    """A batch crosses the broker with each trial's own seed, and the probe's environment holds it."""
    specs = make_specs(5, run_id="r", first=2)
    decoded = decode_batch(json.loads(json.dumps(encode_batch(specs))))
    assert decoded == specs and len({s.seed for s in decoded}) == 5
    assert probe_env(specs[0])["PROBEGATE_TRIAL_SEED"] == str(specs[0].seed)


def test_an_observation_of_a_spec_carries_its_seed() -> None:
    """What a sandbox reports through `Observation.of` (a fault included) names the spec's seed."""
    spec = make_spec(4)
    assert Observation.of(spec, exit_code=0).seed == spec.seed
    assert Observation.harness_fault(spec, "lost", origin=FaultOrigin.HARNESS).seed == spec.seed


def test_the_records_beside_the_card_carry_every_trials_seed(tmp_path) -> None:
    """Each judged trial's record names the seed the coordinator derived for it from the card's run id."""
    suite = build_suite(tmp_path)
    result, _ = run(suite, good)
    records = verified_records(result.card, suite.card)
    assert len(records) == 12
    assert all(r.observation.seed == trial_seed(RUN_ID, r.property_id, r.trial_index) for r in records)


def test_a_worker_that_chose_another_seed_passes_nothing(tmp_path) -> None:
    """Adversarial: statistical trials reported with a seed of the worker's choosing are unproven faults:
    the row cannot pass, draws no credit, and a wrong_seed event names the worker."""
    suite = build_suite(tmp_path)

    def own_seed(spec, fixture: bytes) -> Observation:
        return good(spec, fixture).model_copy(update={"seed": 42, "worker_id": "chooser"})

    result, _ = run(suite, but(STAT, own_seed))
    row = next(r for r in result.card.properties if r.id == STAT)
    assert row.kind is Kind.HARNESS_ERROR and row.hits == 0 and row.counts.creditable is False
    assert row.ledger is None and not result.card.ledger_actions
    events = [e for e in result.card.harness_events if e.kind == "wrong_seed"]
    assert len(events) == 10 and "chooser" in events[0].detail and "seed 42" in events[0].detail
    assert result.card.exit_code != 0


def test_a_replay_draws_another_runs_seeds_and_accept_refuses_it_unless_told(tmp_path, capsys) -> None:
    """`--replay-seeds RUN` gives every trial the seed it had in RUN, the card says so, and the run's
    forecast and `gate accept` refuse it unless accept is given --allow-replayed-seeds."""
    suite = build_suite(tmp_path)
    suite = Suite(replace(suite.request, seeds_from="run-x"), suite.fixtures, suite.card, suite.ledger)
    said: list[str] = []
    result, _ = run(suite, real, said.append, image_id=IMAGE)
    records = verified_records(result.card, suite.card)
    assert all(r.observation.seed == trial_seed("run-x", r.property_id, r.trial_index) for r in records)
    assert result.card.seeds_from == "run-x" and result.card.run_id == RUN_ID
    assert any("--allow-replayed-seeds" in r for r in json.loads(said[-1])["accept_reasons"])
    request = suite.request
    where = {"workdir": request.workdir, "suite": request.suite, "allow_unchecked_oracle": True}
    assert run_accept(suite.card, request.seal, **where) == RET_BLOCKED
    assert "the trials drew the seeds of run run-x (--replay-seeds)" in capsys.readouterr().out
    assert run_accept(suite.card, request.seal, **where, allow_replayed_seeds=True) == RET_OK


def test_replay_seeds_takes_only_a_run_id(capsys) -> None:
    """`--replay-seeds` with anything but a run id's characters is a usage error naming the flag."""
    assert main(["run", "--replay-seeds", "run 1"]) == RET_USAGE
    assert "--replay-seeds: a run id is 1 to 128 letters" in capsys.readouterr().err
