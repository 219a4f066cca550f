"""`gate flakes explain` through enrolled Celery workers gives the local pool's answers: real redis-server,
two real `gate-worker serve` processes, real Docker, the `flaky_seed_and_hash` probe of `examples/flaky`.

With the run id pinned, every seed and hash seed the plan hands out is the same on both sides, and the
probe's outcome is a function of them alone: the two explanations must be equal, variant by variant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import ROOT
from support.servers import RedisServer, Workers, enrol

from gate.cli.executors import Placement, default_executor
from gate.core.policy.explain import Finding
from gate.io.workers import load_roster
from gate.run.explain import ExplainRequest, explain_flakes
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.host.sweep import sweep

pytestmark = pytest.mark.integration

EXAMPLE = ROOT / "examples" / "flaky"
RUN_ID = "explain-celery-0001"  # pinned: the seeds (and so the outcomes) are this run id's
STEADY_N = 8  # a fair coin would hold 8 trials alike once in 128; here nothing is random, and this run id names it


@pytest.fixture
def request_(sandbox_image: str) -> ExplainRequest:
    return ExplainRequest(
        suite=EXAMPLE / "gate.toml",
        workdir=EXAMPLE,
        properties=("flaky_seed_and_hash",),
        allow_unchecked_oracle=True,
        image=sandbox_image,
        steady_n=STEADY_N,
    )


@pytest.fixture
def swept(docker_client) -> Iterator[None]:
    yield
    sweep(docker_client, RUN_ID)


def test_enrolled_workers_explain_as_the_local_pool_does(
    request_: ExplainRequest, workers: Workers, redis_server: RedisServer, tmp_path: Path, swept: None
) -> None:
    """The seed-and-hash probe is explained by trial_seed+hash_seed on both sides, with the same variants,
    trials and counts."""
    local = explain_flakes(
        request_, executor_factory=lambda image: default_executor(Placement(), image, None), run_id=RUN_ID
    )
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "w1", "w2", admin=redis_server.url)
    workers.start("w1")
    workers.start("w2")
    workers.wait_ready()

    def celery(image: str | None) -> CeleryExecutor:
        assert image is not None
        return CeleryExecutor(redis_server.url, image=image, worker_wait_s=60, enrolled=lambda: load_roster(registry))

    remote = explain_flakes(request_, executor_factory=celery, run_id=RUN_ID)
    assert (local[0].finding, local[0].source) == (Finding.EXPLAINED, "trial_seed+hash_seed"), local[0].words
    assert remote == local
