"""The invoice example's paired suite (examples/invoice/paired.toml) through real Redis, real enrolled
`gate-worker serve` processes and real Docker: the same kinds as the local pool (a patch that lowers routing
from 0.95 to 0.85 blocked as inconclusive_sample, one that leaves it alone passing), both sides of each pair
on the worker the coordinator chose; and an enrolled stand-in that reports "no difference" for the pairs it
runs buys the pass with replays off and is caught, its pairs run again, with them on."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery_helpers import RedisServer, Workers, enrol
from gate_runs import EXAMPLE, Run, gate_run
from test_replay_celery import start_statistical_liar

from gate.io.artifacts import read_card
from gate.io.evidence import verified_records

pytestmark = pytest.mark.integration

PAIRED, BAND = "routing_no_worse_than_base", "routing_band_8_of_10"
PAIRED_SEEDS = ("--replay-seeds", "paired-3")  # as tests/integration/cli/test_paired_example.py pins them


def paired_run(patch: str, card: Path, url: str, registry: Path, *extra: str) -> Run:
    return gate_run(
        EXAMPLE, patch, card, "--broker", url, "--workers", str(registry), *extra, new_ledger=True, suite="paired.toml"
    )


def row(run: Run, pid: str = PAIRED) -> dict:
    return next(r for r in run.card["properties"] if r["id"] == pid)


def test_the_paired_suite_gives_the_local_kinds_through_enrolled_workers(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Two enrolled honest workers: the slipping patch's paired row is inconclusive_sample (worse than the base)
    while the fixed band passes it, the same-rate patch passes and is accepted; pairs spread over both workers,
    each row's trials ran where assigned, and the replays of whole pairs found nothing to dispute."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "w1", "w2")
    workers.start("w1")
    workers.start("w2")
    workers.wait_ready()
    # Replays off for the slipping patch (its primaries stay on the card, and the test takes half the time).
    slips = paired_run(
        "paired/slips", tmp_path / "slips" / "card.json", redis_server.url, registry, "--cross-check", "0",
        *PAIRED_SEEDS,
    )  # fmt: skip
    assert slips.kinds() == {PAIRED: "inconclusive_sample", BAND: "pass"}, slips.stderr
    paired = row(slips)
    assert "worse than the base by 0.05" in paired["detail"] and paired["paired"]["state"] == "worse"
    assert paired["paired"]["base"]["hit"] + paired["paired"]["base"]["miss"] == paired["trials"]
    assert slips.accept != 0
    ran_on: dict[tuple[str, int], set[str]] = {}
    for record in verified_records(read_card(slips.card_path), slips.card_path):
        if record.property_id == PAIRED:
            ran_on.setdefault((PAIRED, record.trial_index), set()).add(record.observation.worker_id)
    assert len(ran_on) == paired["trials"] and all(len(w) == 1 for w in ran_on.values()), ran_on  # pairs together
    same = paired_run("paired/same_rate", tmp_path / "same" / "card.json", redis_server.url, registry)
    assert same.kinds() == {PAIRED: "pass", BAND: "pass"}, same.stderr
    assert (same.code, same.accept) == (0, 0), same.accept_said
    summary = same.card["cross_check"]
    assert summary["replays_checked"] >= 1 and summary["disagreements"] == [], summary
    for run in (slips, same):
        paired = row(run)
        assert set(paired["assigned"]) == {"box-w1", "box-w2"} and paired["workers"] == paired["assigned"], paired


def test_a_stand_in_reporting_no_difference_buys_the_pass_alone_and_is_caught_beside_honest_workers(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: an enrolled stand-in that runs both sides of its pairs and reports the patch side as the base
    side went passes the slipping patch when it runs every pair and nothing is replayed; beside two honest
    workers, with replays on, whole pairs go again to a worker that ran neither side, the third worker's
    tie-break catches it, its results are run again, and the row does not pass."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "h1", "h2", "liar")
    start_statistical_liar(workers, "liar", "nodifference")
    workers.wait_ready()
    fooled = paired_run(
        "paired/slips", tmp_path / "fooled" / "card.json", redis_server.url, registry, "--cross-check", "0",
        *PAIRED_SEEDS,
    )  # fmt: skip
    paired = row(fooled)
    assert paired["kind"] == "pass" and paired["paired"]["pairs"]["base_only"] == 0, paired  # the lie bought it
    assert paired["assigned"] == {"box-liar": paired["trials"]}, paired
    workers.start("h1")
    workers.start("h2")
    workers.wait_ready()
    caught = paired_run("paired/slips", tmp_path / "caught" / "card.json", redis_server.url, registry, *PAIRED_SEEDS)
    paired = row(caught)
    summary = caught.card["cross_check"]
    assert summary["quarantined"] == ["box-liar"] and summary["discarded"] == ["box-liar"], summary
    assert paired["kind"] != "pass" and caught.accept != 0, paired
