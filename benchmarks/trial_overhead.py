"""Trial overhead: throughput of batch mode, of a container per trial, and of a bare loop of the
same trivial probe inside one already-running container, in one run, as ratios vs the bare loop.

    .venv/bin/python benchmarks/trial_overhead.py [--trials 40] [--batch 40] [--wave 5] [--repeats 3]
                                                  [--tree-files 0] [--work-copy overlay|copy]
    .venv/bin/python benchmarks/trial_overhead.py --sweep [--trials 40] [--repeats 1]

"single batch" is one run_batch call of --batch trials outside an open run (a container per call);
"fresh run" is the same trials as run_batch calls of --wave trials within one open run, timed from
open (with one prestarted container, as the local pool asks) to close, so the run's container start
and removal count; "warm" is those waves once the run's container is already started (the steady
state of a long run). The fixed cost of a fresh run is the difference, and the last line says how
many trials a fresh run needs before it reaches 0.8 of the bare loop.

Everything runs sequentially on one thread, so the ratios compare per-trial cost, not parallelism.
The bare loop is timed inside the container (subprocess.run of the probe N times), so it carries
no Docker or host cost at all: the strictest baseline. It runs the probe in the mounted tree, while
batch mode gives every trial a fresh work dir and checks it for writes: --tree-files shows that cost.
--sweep (tree_sweep.py) runs tree sizes 0, 300, 3,000 and 30,000 in both work copy modes in one run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from docker.types import Mount

from gate.core.plan import batches
from gate.core.testing import make_specs as spec_batch
from gate.core.trial import ClockSpec, Limits, Observation, TrialSpec
from gate.io.snapshot import world_readable
from worker.host.batchfile import probe_env
from worker.host.engine import DEFAULT_IMAGE, docker_client, resolve_image_id
from worker.host.sandbox import DockerSandbox
from worker.host.sweep import LABEL_RUN, sweep

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
    container = client.containers.run(
        image_id,
        ["sleep", "3600"],
        detach=True,
        network_mode="none",
        read_only=True,
        user="65534:65534",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        pids_limit=64,
        mem_limit="256m",
        nano_cpus=int(1e9),
        mounts=mounts,
        environment=probe_env(make_specs(run_id, 1)[0]),
        labels={LABEL_RUN: run_id},
    )
    try:
        code, output = container.exec_run(["python3", "/opt/bench/loop.py", str(n)])
        if code != 0:
            raise SystemExit(f"bare loop failed: {output.decode(errors='replace')}")
        return float(output.decode().strip().splitlines()[-1])
    finally:
        container.remove(force=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--batch", type=int, default=40, help="trials per run_batch call in single-batch mode")
    parser.add_argument("--wave", type=int, default=5, help="trials per run_batch call within one open run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; each mode's best counts")
    parser.add_argument("--tree-files", type=int, default=0, help="extra 1.2 KB files in the tree beside probe.py")
    parser.add_argument("--work-copy", choices=("overlay", "copy"), help="the sandbox's work copy mode")
    parser.add_argument("--sweep", action="store_true", help="tree sizes 0..30,000 in both modes (tree_sweep.py)")
    args = parser.parse_args(argv)
    if args.sweep:
        from tree_sweep import sweep_main  # beside this script

        return sweep_main(args)
    client = docker_client()
    image_id = resolve_image_id(client, DEFAULT_IMAGE)
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    n = args.trials
    try:
        with tempfile.TemporaryDirectory(prefix="probegate-bench-") as tmp_name:
            tmp = Path(tmp_name)
            tree = make_tree(tmp / "tree", args.tree_files)
            bench = tmp / "bench"
            bench.mkdir()
            inputs = DirInputs(tree)
            specs = make_specs(run_id, n)
            batched = DockerSandbox(client=client, worker_id="bench", work_copy=args.work_copy)
            per_trial = DockerSandbox(client=client, worker_id="bench", per_trial=True, work_copy=args.work_copy)
            timed_sandbox(batched, specs[:2], inputs, 2)  # warm the engine and page cache once
            modes = {
                "bare": lambda: timed_bare_loop(client, image_id, tree, bench, n, run_id),
                "batch": lambda: timed_sandbox(batched, specs, inputs, args.batch),
                "fresh": lambda: timed_sandbox(batched, specs, inputs, args.wave, in_run=True),
                "warm": lambda: timed_sandbox(batched, specs, inputs, args.wave, in_run=True, warm=True),
            }
            # Interleaved rounds, best of each: a noisy stretch of the machine hits every mode alike.
            times: dict[str, list[float]] = {mode: [] for mode in modes}
            for _ in range(args.repeats):
                for mode, timed in modes.items():
                    times[mode].append(timed())
            bare, batch, fresh, warm = (min(times[mode]) for mode in modes)
            few = specs[: min(n, 40)]  # a container per trial is slow; its per-trial cost needs no more
            single = timed_sandbox(per_trial, few, inputs, len(few)) * n / len(few)
    finally:
        sweep(client, run_id)
    rows = [
        ("bare loop in one container", bare),
        (f"single batch ({args.batch}/call)", batch),
        (f"fresh run ({n // args.wave}x{args.wave}, open..close)", fresh),
        ("warm (container already started)", warm),
        ("container per trial", single),
    ]
    for name, took in rows:
        print(f"{name:34s} {n / took:8.1f} trials/s  {1000 * took / n:7.1f} ms/trial  ratio {bare / took:5.2f}")
    fixed, per_bare, per_warm = fresh - warm, bare / n, warm / n
    said = f"fixed cost of a fresh run {1000 * fixed:.0f} ms; "
    if per_bare > 0.8 * per_warm:
        need = 0.8 * fixed / (per_bare - 0.8 * per_warm)
        print(said + f"a fresh run reaches 0.8 of the bare loop from {need:.0f} trials")
    else:
        print(said + "even warm, a trial costs more than 1/0.8 of the bare loop's")
    rates = {name: round(n / took, 2) for name, took in rows}
    rounds = {mode: [round(took, 3) for took in took_s] for mode, took_s in times.items()}
    print(json.dumps({"trials": n, "fixed_ms": round(1000 * fixed), **rates, "rounds_s": rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
