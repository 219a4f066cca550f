"""Dealing by room through real Redis, real enrolled `gate-worker` processes and real Docker: every batch is still
assigned round the workers, but a worker gets its next one only as it has room, and one whose own turns are out
takes the last turns of the one furthest behind. A fast worker beside a slow one answers more than its round share
and every trial comes back once; a stand-in that answers instantly draws more batches the same way, and the
replays still catch its lies (test_replay_celery's instant stand-in shows the verdict)."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest
from support.servers import RedisServer, Workers, enrol, start_statistical_liar

from gate.core.suite.trial import Observation
from gate.core.testing import make_specs
from gate.io.snapshot import LocalInputs
from gate.io.workers import load_roster
from worker.celery.coordinator.dispatch import CeleryExecutor

pytestmark = pytest.mark.integration

TRIALS = 24
BATCH = 2  # 12 batches: 6 each in the round
PROBE = "import time\ntime.sleep(0.2)\nprint('{}')\n"


def deal(redis_server: RedisServer, registry: Path, tmp: Path) -> tuple[list[Observation], CeleryExecutor]:
    """TRIALS trials of one property through a fresh executor reading `registry`; (observations, executor)."""
    tree = tmp / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "probe.py").write_text(PROBE)
    fixture = b"{}"
    digest = hashlib.sha256(fixture).hexdigest()
    executor = CeleryExecutor(
        redis_server.url,
        worker_wait_s=60,
        result_timeout_s=120,
        batch_size=BATCH,
        enrolled=lambda: load_roster(registry),
    )
    with LocalInputs(tree, {digest: fixture}) as inputs:
        specs = make_specs(TRIALS, run_id="deal", tree_digest=inputs.tree_digest, fixture_digest=digest)
        observations = list(executor.run(specs, inputs))
    return observations, executor


def answered_once(observations: list[Observation]) -> Counter[str]:
    """Every trial came back exactly once, none a fault; the trials each worker answered."""
    assert sorted(o.trial_index for o in observations) == list(range(TRIALS)), observations
    assert not [o for o in observations if o.fault], [o.fault for o in observations if o.fault]
    return Counter(o.worker_id for o in observations)


def test_a_slow_worker_sets_no_pace(workers: Workers, redis_server: RedisServer, tmp_path: Path) -> None:
    """A worker with no sandbox to wait on beside one running every probe in Docker: the fast one takes the slow
    one's last turns and copies of what it holds, and answers more than its round half; every trial counts
    once, and the card's shares are who answered."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "fast", "slow")
    workers.start("fast", "--sandbox", "stub")
    workers.start("slow")
    workers.wait_ready()
    observations, executor = deal(redis_server, registry, tmp_path)
    by = answered_once(observations)
    assert by["box-fast"] > TRIALS // 2, by
    assert executor.assigned("deal") == {"p": dict(by)}, (executor.assigned("deal"), by)
    copies = [e for e in executor.events if e.kind == "batch_duplicated"]
    assert all("'box-slow'" in e.detail and "'box-fast'" in e.detail for e in copies), executor.events


def test_an_instant_stand_in_draws_more_batches_than_its_round_share(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: an enrolled stand-in answering at once (its first trial run, the rest copies) beside an honest
    worker: it is dealt every turn it has room for, its own and the honest worker's last ones, and copies of what
    the honest worker holds, so it answers more than half; the coordinator chose each batch's worker (what the
    replays then check: test_replay_celery)."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "honest", "liar")
    workers.start("honest")
    start_statistical_liar(workers, "liar", "instant")
    workers.wait_ready()
    observations, executor = deal(redis_server, registry, tmp_path)
    by = answered_once(observations)
    assert by["box-liar"] > TRIALS // 2, by
    assert executor.assigned("deal") == {"p": dict(by)}, (executor.assigned("deal"), by)
