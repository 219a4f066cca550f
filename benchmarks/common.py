"""What the benchmarks share. Each runs from the repository root as `.venv/bin/python -m benchmarks.NAME`; helpers
the tests use too come from their support package (`tests.support`), those only benchmarks share live here."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from docker.types import Mount

from gate.core.suite.batching import batches
from gate.core.suite.trial import ClockSpec, Limits, Observation, TrialSpec
from gate.core.testing import make_spec
from gate.core.testing import make_specs as spec_batch
from gate.core.trust.enrolment import EnrolledWorker, Roster
from gate.io.keys import load_verify_key
from gate.io.snapshot import LocalInputs, world_readable
from gate.io.workers import load_roster
from tests.support.servers import RedisServer, Workers, enrol
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.host.batchfile import probe_env
from worker.host.engine import DEFAULT_IMAGE, docker_client
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import LABEL_RUN, sweep_dead_workers

# The trial benchmarks (trial_overhead, tree_sweep, fresh_split, worker_pool, warm_interpreter, warm_overlap): a tiny
# tree and probe, one fixture, specs for them, and two timers: the sandbox over a run of trials, and a bare loop of the
# same probe inside one already-running container (the strictest baseline: no Docker or host cost at all).

PROBE = "import sys, json\njson.dump({'ok': True, 'n': len(sys.stdin.read())}, sys.stdout)\n"
FIXTURE = b'{"x": 1}'
CLOCK = ClockSpec(frozen_at=datetime(2026, 3, 1, tzinfo=UTC))

BARE_LOOP = """
import subprocess, sys, time
n = int(sys.argv[1])
t0 = time.monotonic()
for _ in range(n):
    with open("/opt/bench/stdin", "rb") as stdin:
        subprocess.run(["python3", "probe.py"], stdin=stdin, capture_output=True, check=True, cwd="/src")
print(time.monotonic() - t0)
"""


class DirInputs:
    """One tree and one fixture, for the benchmark only."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree

    def tree_dir(self, digest: str) -> Path:
        return self.tree

    def fixture_bytes(self, digest: str) -> bytes:
        return FIXTURE


def make_specs(run_id: str, n: int, limits: Limits | None = None) -> list[TrialSpec]:
    return spec_batch(
        n,
        run_id=run_id,
        property_id="bench",
        tree_digest="bench-tree",
        fixture_path="input.json",
        fixture_digest=hashlib.sha256(FIXTURE).hexdigest(),
        deadline_s=10.0,
        clock=CLOCK,
        limits=limits or Limits(),
    )


def timed_sandbox(
    sandbox: DockerSandbox,
    specs: list[TrialSpec],
    inputs: DirInputs,
    size: int,
    *,
    in_run: bool = False,
    warm: bool = False,
) -> float:
    observed: list[Observation] = []
    if in_run:
        sandbox.open(specs[0].run_id)
        sandbox.prestart(specs[0].run_id, specs[0].limits, 1)
        if warm:  # an untimed first wave: the steady state of a long run, its container already started
            sandbox.run_batch(specs[:size], inputs)
    started = time.monotonic()
    try:
        for group in batches(specs, size):
            observed += sandbox.run_batch(group, inputs)
        took = time.monotonic() - started
    finally:
        if in_run:
            sandbox.close(specs[0].run_id)
    if in_run and not warm:
        took = time.monotonic() - started  # open .. close: the container's start and removal count
    bad = [o for o in observed if o.fault or o.exit_code != 0]
    if bad:
        raise SystemExit(f"benchmark trial failed: {bad[0]}")
    return took


def bare_container(
    client,
    image_id: str,
    mounts: list,
    run_id: str,
    *,
    cpus: float = 1.0,
    mem_limit: str = "512m",
    environment: dict[str, str] | None = None,
    tmpfs: dict[str, str] | None = None,
):
    """A sleeping container locked down as the sandbox's are (no network, read-only, nobody, no capabilities,
    `cpus` CPUs), for a benchmark's loop to `exec_run` in; labelled with `run_id` for the sweep."""
    return client.containers.run(
        image_id,
        ["sleep", "3600"],
        detach=True,
        network_mode="none",
        network_disabled=True,
        read_only=True,
        user="65534:65534",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        pids_limit=64,
        mem_limit=mem_limit,
        nano_cpus=int(cpus * 1e9),
        mounts=mounts,
        environment=environment,
        tmpfs=tmpfs,
        labels={LABEL_RUN: run_id},
    )


def make_tree(tree: Path, files: int) -> Path:
    """probe.py and `files` files of 1.2 KB in ten packages: a realistic tree, every file of which copy
    mode lays out and reads back per trial."""
    tree.mkdir()
    (tree / "probe.py").write_text(PROBE)
    for i in range(files):
        (tree / f"pkg{i % 10}").mkdir(mode=0o755, exist_ok=True)
        (tree / f"pkg{i % 10}" / f"mod{i}.py").write_text("VALUE = 1\n" * 120)
    world_readable(tree)
    return tree


def timed_bare_loop(client, image_id: str, tree: Path, tmp: Path, n: int, run_id: str) -> float:
    """Seconds for n runs of the probe inside one running container with the sandbox's settings."""
    (tmp / "stdin").write_bytes(FIXTURE)
    (tmp / "faketimerc").write_text(CLOCK.faketimerc() + "\n")
    (tmp / "loop.py").write_text(BARE_LOOP)
    for path in (tmp, *tmp.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o444)
    mounts = [
        Mount("/src", str(tree), type="bind", read_only=True),
        Mount("/opt/bench", str(tmp), type="bind", read_only=True),
        Mount("/etc/faketimerc", str(tmp / "faketimerc"), type="bind", read_only=True),
    ]
    container = bare_container(
        client, image_id, mounts, run_id, mem_limit="256m", environment=probe_env(make_specs(run_id, 1)[0])
    )
    try:
        code, output = container.exec_run(["python3", "/opt/bench/loop.py", str(n)])
        if code != 0:
            raise SystemExit(f"bare loop failed: {output.decode(errors='replace')}")
        return float(output.decode().strip().splitlines()[-1])
    finally:
        container.remove(force=True)


class StepSandbox(DockerSandbox):
    """A DockerSandbox that asks the supervisor where each trial's time went (`timings`) and keeps it:
    `reports`, one (when it arrived, its `steps_s`) per trial."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, timings=True, **kwargs)
        self.reports: list[tuple[float, dict[str, float]]] = []

    @property
    def steps(self) -> list[dict[str, float]]:
        """Each report's step split, in the order they came."""
        return [steps for _, steps in self.reports]

    def _observation(self, spec: TrialSpec, image_id: str, report: dict, note: str = "") -> Observation:
        self.reports.append((time.monotonic(), dict(report.get("steps_s") or {})))
        return super()._observation(spec, image_id, report, note)


# The heavy probe (warm_interpreter, warm_overlap): numpy summing an array, in the project image built from its lock.
HEAVY = Path(__file__).resolve().parent / "heavy"


def project_image(suite: Path) -> str | None:
    """The project image `gate image build` makes for `suite` (built once, then found); None, said on
    stdout, when it cannot be built (no index reachable for its wheels)."""
    done = subprocess.run(
        [sys.executable, "-m", "gate.cli", "image", "build", "--suite", str(suite)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(f"skipped: gate image build --suite {suite} failed: {done.stderr.strip()[-300:]}", flush=True)
        return None
    return done.stdout.strip().splitlines()[-1]


def copy_tree(source: Path, dest: Path) -> Path:
    subprocess.run(["cp", "-r", str(source), str(dest)], check=True)
    world_readable(dest)
    return dest


# The fleet benchmarks (dispatch, dispatch_assigned, fleet, straggler, vanished_worker, flake_explain): the trial
# specs they send, the roster enrolling their workers' keys, a private broker with enrolled workers on real Docker,
# and one timed run through a coordinator reading the registry.
FLEET_DEADLINE_S = 10.0  # per trial


def dispatch_specs(n: int, tree_digest: str, fixture_digest: str, run_id: str) -> list[TrialSpec]:
    """`n` trials over four properties of one run, on one tree and fixture (the dispatch benchmarks')."""
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
    redis: RedisServer
    workers: Workers


@contextlib.contextmanager
def bench_fleet(prefix: str, probe: str, names: Sequence[str]) -> Iterator[BenchFleet]:
    """A redis-server and `names` enrolled (not started) with `probe` as the tree's probe; everything stopped,
    swept and removed at the end."""
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


def start_fleet(workers: Workers, names: list[str], urls: dict[str, str], concurrency: int) -> None:
    """(Re)start every worker with the broker URL given for it."""
    workers.stop_all()
    workers.urls.update(urls)
    for name in names:
        workers.start(name, concurrency=concurrency)
    workers.wait_ready(timeout=120)


def plan(n: int, properties: int, run_id: str, inputs: LocalInputs, digest: str, image_id: str) -> list[TrialSpec]:
    """`n` trials over `properties` distinct property ids, each property's trials together."""
    per = max(1, -(-n // properties))
    return [
        make_spec(
            i,
            run_id=run_id,
            property_id=f"p{i // per:02d}",
            tree_digest=inputs.tree_digest,
            fixture_digest=digest,
            deadline_s=FLEET_DEADLINE_S,
            image_id=image_id,
        )
        for i in range(n)
    ]


def timed_run(
    url: str, registry: Path, run_id: str, n: int, properties: int, inputs: LocalInputs, digest: str, **options: Any
) -> dict:
    """One run, open to close, through a fresh coordinator (`options`: more of its settings); its trials/s and
    who ran what."""
    roster = lambda: load_roster(registry)  # noqa: E731
    executor = CeleryExecutor(url, image=DEFAULT_IMAGE, worker_wait_s=60, enrolled=roster, **options)
    specs = plan(n, properties, run_id, inputs, digest, executor.image_id())
    started = time.monotonic()
    executor.open(run_id, Limits())
    try:
        observations = list(executor.run(specs, inputs))
    finally:
        executor.close(run_id)
    elapsed = time.monotonic() - started
    faults = [o for o in observations if o.fault]
    if len(observations) != n or faults:
        detail = faults[0].fault if faults else f"{len(observations)} of {n} back"
        raise RuntimeError(f"run {run_id} did not come back whole: {len(faults)} fault(s), {detail}")
    sent = batches(specs, executor.batch_size_for(specs, executor.discover()))
    counts = Counter(o.worker_id or "?" for o in observations)
    return {
        "elapsed": elapsed,
        "rate": n / elapsed,
        "split": "/".join(str(counts[w]) for w in sorted(counts)),
        "batches": len(sent),
        "batch_size": max(len(b) for b in sent),
        "events": Counter(e.kind for e in executor.events),
    }
