"""What the trial benchmarks share: a tiny tree and probe, one fixture, specs for them, and two timers —
the sandbox over a run of trials, and a bare loop of the same probe inside one already-running container
(the strictest baseline: no Docker or host cost at all). Used by trial_overhead.py and tree_sweep.py.
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime
from pathlib import Path

from docker.types import Mount

from gate.core.suite.batching import batches
from gate.core.suite.trial import ClockSpec, Limits, Observation, TrialSpec
from gate.core.testing import make_specs as spec_batch
from gate.io.snapshot import world_readable
from worker.host.batchfile import probe_env
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import LABEL_RUN

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
