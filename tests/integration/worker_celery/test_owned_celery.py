"""Owned workers through real Redis, real `gate-worker serve` processes and real Docker: a fleet shrunk to one
stranger decides beside the operator's own (owned) worker, which runs every second run; a stranger lying beside
it is caught and the row decided on the truth; and an owned worker alone decides, where a stranger alone
cannot."""

from __future__ import annotations

from pathlib import Path

import pytest
from gate_runs import EXAMPLE, NOISY_SEEDS, ExampleRuns, Run, gate_run
from support.servers import RedisServer, Workers, enrol, start_statistical_liar

pytestmark = pytest.mark.integration

STATISTICAL = "tool_choice_rate"


def run_on(patch: str, card: Path, url: str, registry: Path, *extra: str) -> Run:
    return gate_run(EXAMPLE, patch, card, "--broker", url, "--workers", str(registry), *extra, new_ledger=True)


def second_runs(run: Run) -> dict[str, int]:
    return run.card["cross_check"]["verified_by"]


def test_a_stranger_beside_an_owned_worker_decides_and_the_owned_one_alone_does_too(
    workers: Workers, redis_server: RedisServer, example_runs: ExampleRuns, tmp_path: Path
) -> None:
    """An honest stranger and an owned worker: `good` is accepted with the local pool's kinds, every second run
    ran on the owned worker and none of its own results ran twice; with the stranger gone, the owned worker
    alone decides `good` the same way."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "own", "stranger", admin=redis_server.url, owned=("own",))
    workers.start("own")
    workers.start("stranger")
    workers.wait_ready()
    # Sent at once round the two (`--room 0`): dealt by room, the stranger might draw no batch at all.
    run = run_on("good", tmp_path / "both" / "card.json", redis_server.url, registry, "--room", "0")
    assert (run.code, run.accept) == (0, 0), run.stderr
    assert run.kinds() == example_runs.get("good").kinds()
    assert run.card["cross_check"]["trusted"] == ["box-own"]
    assert set(second_runs(run)) == {"box-own"}, run.card["cross_check"]
    assert {n for row in run.card["properties"] for n in row["workers"]} == {"box-own", "box-stranger"}
    workers.kill("stranger")
    del workers.procs["stranger"]
    alone = run_on("good", tmp_path / "alone" / "card.json", redis_server.url, registry)
    assert (alone.code, alone.accept) == (0, 0), alone.stderr
    assert alone.kinds() == example_runs.get("good").kinds()
    assert {n for row in alone.card["properties"] for n in row["workers"]} == {"box-own"}


def test_a_stranger_lying_beside_an_owned_worker_is_caught_and_buys_nothing(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: an enrolled stand-in fabricating a hit on every statistical trial it runs, beside an owned
    worker (the noisy sampler's row is 6 of 10 under the pinned seeds; the lies would make it a pass): its
    replayed lies meet the owned worker's runs, each dispute is settled for the owned worker with no third, the
    stand-in is caught and every result of it runs again on the owned worker, so the row is what the truth makes
    it and accept refuses it."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "own", "liar", owned=("own",))
    workers.start("own")
    start_statistical_liar(workers, "liar")
    workers.wait_ready()
    # The whole suite: its batches going round the two workers give the stand-in misses of the row to lie about.
    # Sent at once (`--room 0`): dealt by room, which trials the instant stand-in draws depends on the load.
    run = run_on("noisy_sampler", tmp_path / "card.json", redis_server.url, registry, *NOISY_SEEDS, "--room", "0")
    row = next(r for r in run.card["properties"] if r["id"] == STATISTICAL)
    assert row["kind"] != "pass", row
    assert run.accept != 0 and any(STATISTICAL in reason for reason in run.accepted["reasons"]), run.accept_said
    summary = run.card["cross_check"]
    assert summary["discarded"] == ["box-liar"] and summary["trusted"] == ["box-own"], summary
    assert set(second_runs(run)) == {"box-own"}, summary
    settled = [s for s in summary["settlements"] if s["quarantined"] == "box-liar"]
    assert settled and all(s["tie_breaker"] == "box-own" for s in settled), summary["settlements"]
    assert not summary["unresolved"], summary  # the owned worker settled every dispute: none left open
