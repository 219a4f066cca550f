"""What the dispatch benchmarks share (benchmarks/dispatch.py, benchmarks/dispatch_assigned.py, fleet.py,
vanished_worker.py): the trial specs they send, the roster enrolling their workers' keys, and a private broker
with enrolled workers on real Docker."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))  # the tests' process helpers

from gate.core.suite.trial import TrialSpec
from gate.core.testing import make_spec
from gate.core.trust.enrolment import EnrolledWorker, Roster
from gate.io.keys import load_verify_key


def specs(n: int, tree_digest: str, fixture_digest: str, run_id: str) -> list[TrialSpec]:
    """`n` trials over four properties of one run, on one tree and fixture."""
    common = {"run_id": run_id, "tree_digest": tree_digest, "fixture_digest": fixture_digest}
    return [make_spec(i, property_id=f"p{i * 4 // n}", **common) for i in range(n)]


def enrolled_roster(public_keys: list[Path]) -> Roster:
    """Every benchmark worker's key enrolled (the workers made them at start)."""
    now = datetime.now(UTC)
    keys = [load_verify_key(path) for path in public_keys]
    return Roster(
        workers=tuple(
            EnrolledWorker(name=f"bench{i}", key_id=k.key_id, public_key=k.pem().decode(), enrolled_at=now)
            for i, k in enumerate(keys)
        )
    )


@dataclass(frozen=True)
class BenchFleet:
    """A private broker and workers enrolled under their own broker users, in a scratch folder: `tree` holds the
    probe, `fixture` (and its `digest`) the one fixture; `workers.urls` each worker's own broker URL."""

    tmp: Path
    tree: Path
    fixture: bytes
    digest: str
    registry: Path
    client: Any  # the docker client the workers' containers are swept with
    redis: Any  # celery_helpers.RedisServer
    workers: Any  # celery_helpers.Workers


@contextlib.contextmanager
def bench_fleet(prefix: str, probe: str, names: Sequence[str]) -> Iterator[BenchFleet]:
    """A redis-server and `names` enrolled (not started) with `probe` as the tree's probe; everything stopped,
    swept and removed at the end."""
    from celery_helpers import RedisServer, Workers, enrol

    from worker.host.engine import docker_client
    from worker.host.sweep import sweep_dead_workers

    tmp = Path(tempfile.mkdtemp(prefix=f"probegate-{prefix}-"))
    (tmp / "tree").mkdir()
    (tmp / "tree" / "probe.py").write_text(probe)
    fixture = b"{}"
    client = docker_client()
    redis = RedisServer(tmp / "redis")
    redis.start()
    workers = Workers(redis.url, tmp)
    try:
        registry = tmp / "workers.json"
        enrol(workers, registry, *names, admin=redis.url)
        digest = hashlib.sha256(fixture).hexdigest()
        yield BenchFleet(tmp, tmp / "tree", fixture, digest, registry, client, redis, workers)
    finally:
        workers.stop_all()
        redis.stop()
        with contextlib.suppress(Exception):
            sweep_dead_workers(client)
        shutil.rmtree(tmp, ignore_errors=True)
