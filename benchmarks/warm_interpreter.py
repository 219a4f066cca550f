"""Warm-interpreter trials against fresh ones (issue 27), through the real sandbox (supervisor, work
copy, write detection), with a bare loop of the same probe as the baseline, all in one run:

    .venv/bin/python -m benchmarks.warm_interpreter [--trials 64] [--wave 16] [--repeats 3]
                                                    [--probes invoice windows heavy]

Three probes: the invoice example's (standard library only, in the sandbox image), the windows
example's (PyYAML and python-dateutil, in the project image `gate image build` makes from its hashed
lock) and a heavy one summing a numpy array (the project image built from benchmarks/heavy/'s hashed
lock of numpy). Per probe and mode the trials run in waves within one open run whose container is
already started (an untimed first wave), so what differs is the probe's start; interleaved rounds,
best of each. The split per trial: the fork (warm only: from the parent's os.fork to the child about
to run the probe, its modules, streams and seeds reset), the probe (fresh: the spawn, the interpreter's
start and the probe; warm: the hand-over to the parent, the probe, its exit and reaping), the warm
parent's start (spread over its PARENT_TRIALS trials), the supervisor (work copy, write detection,
reset) and the host (batch file, report, observation).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from docker.types import Mount

from benchmarks.common import CLOCK, HEAVY, StepSandbox, bare_container, copy_tree, project_image
from gate.core.suite.batching import batches
from gate.core.suite.trial import Interpreter, Limits, TrialSpec
from gate.core.testing import make_specs
from worker.box.warmclient import PARENT_TRIALS
from worker.host.batchfile import probe_env
from worker.host.engine import DEFAULT_IMAGE, docker_client, resolve_image_id
from worker.host.sweep import sweep

ROOT = Path(__file__).resolve().parents[1]
BARE_LOOP = """
import json, subprocess, sys, time
argv, n = json.loads(sys.argv[1]), int(sys.argv[2])
subprocess.run(["cp", "-r", "/src/.", "/work/"], check=True)  # a writable copy, as the sandbox gives
t0 = time.monotonic()
for _ in range(n):
    with open("/opt/bench/stdin", "rb") as stdin:
        subprocess.run(argv, stdin=stdin, capture_output=True, check=True, cwd="/work")
print(time.monotonic() - t0)
"""


@dataclass(frozen=True)
class Probe:
    name: str
    tree: Path
    fixture: bytes
    argv: tuple[str, ...]
    image: str  # an image name or ID
    pythonpath: tuple[str, ...] = ()


class Inputs:
    def __init__(self, tree: Path, fixture: bytes) -> None:
        self.tree, self.fixture = tree, fixture

    def tree_dir(self, digest: str) -> Path:
        return self.tree

    def fixture_bytes(self, digest: str) -> bytes:
        return self.fixture


def probes(tmp: Path, wanted: list[str]) -> list[Probe]:
    found = []
    if "invoice" in wanted:
        tree = ROOT / "examples" / "invoice" / "patches" / "good"
        fixture = (ROOT / "examples" / "invoice" / "fixtures" / "invoices" / "inv-001.json").read_bytes()
        tree = copy_tree(tree, tmp / "invoice")
        found.append(Probe("invoice", tree, fixture, ("python3", "probe.py"), DEFAULT_IMAGE))
    if "windows" in wanted:
        repo = ROOT / "examples" / "windows" / "repo"
        fixture = (repo / "probes" / "fixtures" / "requests" / "retry.json").read_bytes()
        if image := project_image(repo / "gate.toml"):
            tree = copy_tree(repo, tmp / "windows")
            found.append(Probe("windows", tree, fixture, ("python3", "probes/probe.py"), image, ("src",)))
    if "heavy" in wanted and (image := project_image(HEAVY / "gate.toml")):
        tree = copy_tree(HEAVY, tmp / "heavy")
        found.append(Probe("heavy", tree, b'{"n": 100000}', ("python3", "probe.py"), image))
    return found


def specs_for(probe: Probe, run_id: str, image_id: str, n: int, mode: Interpreter) -> list[TrialSpec]:
    return make_specs(
        n,
        run_id=run_id,
        property_id=f"bench-{probe.name}",
        tree_digest=f"bench-{probe.name}",
        fixture_path="input.json",
        fixture_digest="bench",
        deadline_s=30.0,
        clock=CLOCK,
        limits=Limits(memory_mb=512),
        image_id=image_id,
        probe_argv=probe.argv,
        pythonpath=probe.pythonpath,
        interpreter=mode,
    )


def timed_mode(sandbox: StepSandbox, specs: list[TrialSpec], inputs: Inputs, wave: int) -> dict[str, float]:
    """Seconds per trial in all and split, for `specs` in waves within one open run, its container
    already started by an untimed first wave."""
    run_id = specs[0].run_id
    sandbox.open(run_id)
    try:
        sandbox.run_batch(specs[:wave], inputs)
        sandbox.reports.clear()
        started = time.monotonic()
        observed = [obs for group in batches(specs, wave) for obs in sandbox.run_batch(group, inputs)]
        took = time.monotonic() - started
    finally:
        sandbox.close(run_id)
    bad = [o for o in observed if o.fault or o.exit_code != 0]
    if bad:
        raise SystemExit(f"benchmark trial failed: {bad[0].fault or bad[0].stderr.data[-300:]}")
    n = len(specs)
    steps = [report for _, report in sandbox.reports]
    if specs[0].interpreter is Interpreter.WARM and not all("fork" in step for step in steps):
        raise SystemExit("a warm trial's report gave no fork time")
    fork = sum(s.get("fork", 0.0) for s in steps) / n
    probe = sum(s.get("probe", 0.0) for s in steps) / n - fork
    parent = sum(s.get("parent", 0.0) for s in steps) / n
    supervisor = sum(s.get("layer", 0.0) + s.get("detect", 0.0) + s.get("reset", 0.0) for s in steps) / n
    starts = [s["parent"] for s in steps if s.get("parent")]
    return {
        "total": took / n,
        "fork": fork,
        "probe": probe,
        "parent": parent,
        "supervisor": supervisor,
        "host": took / n - fork - probe - parent - supervisor,
        "parent_start": sum(starts) / len(starts) if starts else 0.0,
    }


def bare_loop(client, probe: Probe, image_id: str, tmp: Path, n: int, run_id: str) -> float:
    """Seconds per run of the probe, `n` fresh `python3` runs inside one running container (no supervisor),
    in one writable copy of the tree (no fresh copy, no write detection)."""
    bench = tmp / f"bare-{probe.name}"
    bench.mkdir(exist_ok=True)
    (bench / "stdin").write_bytes(probe.fixture)
    (bench / "faketimerc").write_text(CLOCK.faketimerc() + "\n")
    (bench / "loop.py").write_text(BARE_LOOP)
    for path in (bench, *bench.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o444)
    spec = specs_for(probe, run_id, image_id, 1, Interpreter.FRESH)[0]
    mounts = [
        Mount("/src", str(probe.tree), type="bind", read_only=True),
        Mount("/opt/bench", str(bench), type="bind", read_only=True),
        Mount("/etc/faketimerc", str(bench / "faketimerc"), type="bind", read_only=True),
    ]
    container = bare_container(
        client,
        image_id,
        mounts,
        run_id,
        environment=probe_env(spec),
        tmpfs={"/work": "size=64m,mode=1777", "/tmp": "size=64m,mode=1777"},
    )
    try:
        code, output = container.exec_run(["python3", "/opt/bench/loop.py", json.dumps(list(probe.argv)), str(n)])
        if code != 0:
            raise SystemExit(f"bare loop failed: {output.decode(errors='replace')[-500:]}")
        return float(output.decode().strip().splitlines()[-1]) / n
    finally:
        container.remove(force=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--wave", type=int, default=16, help="trials per run_batch call")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; each mode's best counts")
    parser.add_argument("--probes", nargs="+", default=["invoice", "windows", "heavy"])
    args = parser.parse_args(argv)
    client = docker_client()
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="probegate-bench-") as tmp_name:
            tmp = Path(tmp_name)
            for probe in probes(tmp, args.probes):
                image_id = resolve_image_id(client, probe.image)
                inputs = Inputs(probe.tree, probe.fixture)
                sandbox = StepSandbox(client=client, worker_id="bench", image=probe.image)
                rounds: dict[str, list[dict[str, float]]] = {"fresh": [], "warm": []}
                bare: list[float] = []
                for _ in range(args.repeats):
                    bare.append(bare_loop(client, probe, image_id, tmp, args.trials, run_id))
                    for mode in (Interpreter.FRESH, Interpreter.WARM):
                        specs = specs_for(probe, run_id, image_id, args.trials, mode)
                        rounds[mode.value].append(timed_mode(sandbox, specs, inputs, args.wave))
                best = {mode: min(taken, key=lambda row: row["total"]) for mode, taken in rounds.items()}
                results[probe.name] = {"bare": min(bare), **best}
                print_probe(probe.name, min(bare), best, args.trials)
    finally:
        sweep(client, run_id)
    print(json.dumps({"trials": args.trials, "parent_trials": PARENT_TRIALS, "results": results}))
    return 0


def print_probe(name: str, bare: float, best: dict[str, dict[str, float]], n: int) -> None:
    fresh, warm = best["fresh"], best["warm"]
    print(f"{name}: {n} trials, ms/trial (best of rounds)", flush=True)
    print(f"  bare loop (fresh python3, no supervisor) {1000 * bare:7.1f}")
    for mode, row in best.items():
        fork = f"{1000 * row['fork']:.1f}" if mode == "warm" else "-"
        split = "  ".join(f"{key} {1000 * row[key]:.1f}" for key in ("probe", "parent", "supervisor", "host"))
        split = f"fork {fork}  {split}"
        print(f"  {mode:5s} through the sandbox            {1000 * row['total']:7.1f}   ({split})")
    print(
        f"  warm vs fresh: {fresh['total'] / warm['total']:.2f}x per trial, "
        f"{fresh['probe'] / (warm['fork'] + warm['probe']):.2f}x the probe alone (fork and probe); "
        f"warm vs bare loop {bare / warm['total']:.2f}x; a parent starts in "
        f"{1000 * warm['parent_start']:.0f} ms, {1000 * warm['parent_start'] / PARENT_TRIALS:.1f} ms per trial "
        f"over its {PARENT_TRIALS}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
