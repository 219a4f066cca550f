"""The coordinator decides who runs what, through real Redis, real enrolled `gate-worker serve` processes and
real Docker: every batch goes to an enrolled worker's direct queue, spread per property, and the card says
who was assigned and who ran which trials."""

from __future__ import annotations

from pathlib import Path

import pytest
from gate_runs import EXAMPLE, NOISY_SEEDS, ExampleRuns, Run, gate_run
from support.servers import RedisServer, Workers, enrol, start_fabricator
from test_enrol import Fleet, broker, fleet, gate, public_key, run_trials

from gate.io.workers import load_roster
from worker.celery.coordinator.dispatch import CeleryExecutor

pytestmark = pytest.mark.integration

STATISTICAL = "tool_choice_rate"
ONLY_STAT = ("--property", STATISTICAL)  # a run of the statistical row alone, where only that row is asserted
__all__ = ["broker", "fleet"]  # test_enrol's fixtures, used here


def enrolled_run(patch: str, card: Path, url: str, registry: Path, *extra: str) -> Run:
    return gate_run(EXAMPLE, patch, card, "--broker", url, "--workers", str(registry), *extra, new_ledger=True)


AT_ONCE = ("--room", "0")


def spread(row: dict, names: set[str]) -> None:
    """The row's trials were assigned among `names` (to all of them when it has a trial for each) and ran
    exactly where assigned."""
    assert set(row["assigned"]) <= names and sum(row["assigned"].values()) == row["trials"], row
    if row["trials"] >= 2 * len(names):
        assert set(row["assigned"]) == names, row
    assert row["workers"] == row["assigned"], row  # nobody answered more than its share


def test_two_enrolled_honest_workers_share_every_property(
    workers: Workers, redis_server: RedisServer, example_runs: ExampleRuns, tmp_path: Path
) -> None:
    """Two enrolled honest workers, each under its own broker user (its own queue and results only): `good` is
    accepted with the local pool's kinds, every row's trials spread over both and run where assigned; the noisy
    sampler on its pinned seeds is refused."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "w1", "w2", admin=redis_server.url)
    workers.start("w1")
    workers.start("w2")
    workers.wait_ready()
    assert all("consuming it alone" in (tmp_path / f"{name}.log").read_text() for name in ("w1", "w2"))
    # Sent at once round the two (`--room 0`): dealt by room, a worker that answers sooner takes more batches,
    # and how many depends on the machine's load, not on the assignment being checked here.
    run = enrolled_run("good", tmp_path / "good" / "card.json", redis_server.url, registry, *AT_ONCE)
    assert (run.code, run.accept) == (0, 0), run.stderr
    assert run.kinds() == example_runs.get("good").kinds()
    for row in run.card["properties"]:
        spread(row, {"box-w1", "box-w2"})
    assert {n for r in run.card["properties"] for n in r["assigned"]} == {"box-w1", "box-w2"}
    statistical = next(r for r in run.card["properties"] if r["id"] == STATISTICAL)
    assert (
        abs(statistical["assigned"]["box-w1"] - statistical["assigned"]["box-w2"])
        <= max(statistical["assigned"].values()) // 2
    ), statistical  # round robin by batch, sent at once: the shares differ by one batch at most
    kinds = {e["kind"] for e in run.card["harness_events"]}
    assert not kinds & {"unassigned_signer", "one_worker", "no_enrolled_worker"}, run.card["harness_events"]
    # Its statistical row alone: the whole suite's spread was proven on `good`.
    noisy = enrolled_run(
        "noisy_sampler", tmp_path / "noisy" / "card.json", redis_server.url, registry, *NOISY_SEEDS, *ONLY_STAT,
        *AT_ONCE,
    )  # fmt: skip
    assert noisy.kinds()[STATISTICAL] == "inconclusive_sample", noisy.card["properties"]
    assert noisy.accept != 0 and f"{STATISTICAL}: inconclusive_sample" in noisy.accept_said, noisy.accept_said
    spread(next(r for r in noisy.card["properties"] if r["id"] == STATISTICAL), {"box-w1", "box-w2"})


def test_an_enrolled_stand_in_takes_no_more_than_its_assigned_share(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: an enrolled stand-in that answers as fast as it can beside an honest enrolled worker gets
    only the batches assigned to it (half of each row, on the card), never the honest worker's share; with the
    honest worker gone its share is the whole row, and the card says the row rests on one worker."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "honest", "liar")
    workers.start("honest")
    start_fabricator(workers, "liar", signed=True)
    workers.wait_ready()
    # Sent at once (`--room 0`): dealt by room the instant liar is meant to draw more batches
    # (test_readiness_celery.py); here the bound is on what it may answer of what it was assigned.
    run = enrolled_run(
        "noisy_sampler", tmp_path / "both" / "card.json", redis_server.url, registry, *NOISY_SEEDS, *AT_ONCE
    )
    for row in run.card["properties"]:
        spread(row, {"box-honest", "box-liar"})
    statistical = next(r for r in run.card["properties"] if r["id"] == STATISTICAL)
    assert statistical["assigned"]["box-liar"] <= statistical["trials"] // 2 + 1, statistical
    workers.kill("honest")
    del workers.procs["honest"]
    alone = enrolled_run(
        "noisy_sampler", tmp_path / "alone" / "card.json", redis_server.url, registry, *NOISY_SEEDS, *ONLY_STAT
    )  # the row whose share is asserted, alone
    statistical = next(r for r in alone.card["properties"] if r["id"] == STATISTICAL)
    assert statistical["assigned"] == {"box-liar": statistical["trials"]}, statistical
    lone = {e["property_id"] for e in alone.card["harness_events"] if e["kind"] == "one_worker"}
    assert STATISTICAL in lone, alone.card["harness_events"]


def test_a_batch_whose_worker_died_goes_to_another_enrolled_worker(
    fleet: Fleet, broker: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An enrolled worker dies after the coordinator found it: the batches assigned to it never come back
    and go to the other enrolled worker's direct queue (a copy once it is idle, or after the result timeout);
    every trial is that worker's, and the events say which batches moved from whom to whom."""
    registry = tmp_path / "workers.json"
    for name in ("w1", "w2"):
        gate("workers", "enrol", str(public_key(fleet, name)), "--name", f"box-{name}", "--workers", str(registry),
             capsys=capsys)  # fmt: skip
        fleet.start(name, "--sandbox", "stub")
    fleet.wait_ready()
    # Dealt at once round the two (room 0): dealt by room, the worker that answers first may take every batch.
    executor = CeleryExecutor(
        broker.url, worker_wait_s=30, result_timeout_s=8, batch_size=3, enrolled=lambda: load_roster(registry),
        room_per_process=0,
    )  # fmt: skip
    observations, _ = run_trials(broker, tmp_path, registry, executor=executor)
    assert {o.worker_id for o in observations} == {"box-w1", "box-w2"}
    fleet.stop("w2")
    executor.events.clear()
    observations, _ = run_trials(broker, tmp_path, registry, executor=executor)
    assert all(o.fault is None and o.worker_id == "box-w1" for o in observations), observations
    # Each of w2's batches went to w1: copied once w1 was idle, or moved after the result timeout.
    moved = [e for e in executor.events if e.kind in ("batch_reassigned", "batch_duplicated")]
    assert len(moved) == 2 and all("'box-w2'" in e.detail and "'box-w1'" in e.detail for e in moved), executor.events
