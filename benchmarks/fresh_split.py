"""Where a fresh short run's time goes (issue 13, "Fresh short runs"), at 0, 3,000 and 30,000 files:

    .venv/bin/python -m benchmarks.trial_overhead --fresh-split [--trials 40] [--wave 5] [--repeats 1] [--pool]

Per tree size: the bare loop of the probe in one container (the baseline), then a fresh run done
serially (no prestart, so its steps add up) with each step timed: container create and start, the
host showing the tree at the container's /src (a read-only mount as root, else hard links), the
supervisor reading (hashing) the tree, proving the clock, laying out the overlay's lower and its dry
run (its own timings), the first trial (from its batch file to its report, those once-costs taken
out) and the later trials, and the close. Then the ratios against the bare loop: a fresh run as
`gate run` does it (open .. close, one prestarted container), with --pool the same from a standing
pool (worker/host/pool.py), and warm.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from benchmarks.common import DirInputs, StepSandbox, make_specs, make_tree, timed_bare_loop, timed_sandbox
from gate.core.suite.batching import batches
from gate.core.suite.trial import Limits, Observation
from worker.host import runcontainers as runcontainers_module
from worker.host import warm as warm_module
from worker.host.engine import DEFAULT_IMAGE, Container, docker_client, resolve_image_id
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import sweep

SIZES = (0, 3_000, 30_000)
LIMITS = Limits(tmpfs_mb=160, memory_mb=512, tree_files=40_000)  # as tree_sweep.py: room for 30,000 files
ONCE = ("tree", "clock", "lower", "dry")  # the supervisor's once-per-container steps, in its reports


@contextmanager
def timers(spent: dict[str, float]):
    """Time the host's steps of a fresh run by wrapping the functions that do them."""
    patched = [
        (runcontainers_module, "create_container", "create"),
        (Container, "start", "start"),
        (warm_module, "fill_tree", "link"),
        (warm_module, "show", "link"),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]

    def timed(original, key):
        def run(*args, **kwargs):
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                spent[key] = spent.get(key, 0.0) + time.monotonic() - started

        return run

    for (owner, name, original), (_, _, key) in zip(originals, patched, strict=True):
        setattr(owner, name, timed(original, key))
    try:
        yield spent
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def serial_split(client, tree: Path, n: int, wave: int) -> dict[str, float]:
    """One fresh run with no prestart, every step timed (seconds)."""
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    specs = make_specs(run_id, n, LIMITS)
    inputs = DirInputs(tree)
    sandbox = StepSandbox(client=client, worker_id="bench", pool="off")
    spent: dict[str, float] = {}
    try:
        with timers(spent):
            started = time.monotonic()
            sandbox.open(run_id)
            for group in batches(specs, wave):
                sandbox.run_batch(group, inputs)
            ran = time.monotonic()
            sandbox.close(run_id)
            spent["close"] = time.monotonic() - ran
            spent["total"] = time.monotonic() - started
    finally:
        sweep(client, run_id)
    arrivals = [at for at, _ in sandbox.reports]
    once = sandbox.reports[0][1]
    for step in ONCE:
        spent[step] = once.get(step, 0.0)
    host = spent.get("create", 0.0) + spent.get("start", 0.0) + spent.get("link", 0.0)
    # The first report arrives after open, the host's steps, the supervisor's once-costs and one trial.
    first = arrivals[0] - started - host - sum(spent[s] for s in ONCE)
    spent["first"] = first
    spent["later"] = statistics.fmean(b - a for a, b in itertools.pairwise(arrivals)) if n > 1 else 0.0
    return spent


def pooled_fresh(client, tree: Path, n: int, wave: int, socket_path: Path) -> dict[str, float]:
    """A fresh run (open .. close) whose container comes from the standing pool: its seconds in all,
    taking the container (open and prestart), the trials, and the close."""
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    specs = make_specs(run_id, n, LIMITS)
    inputs = DirInputs(tree)
    sandbox = DockerSandbox(client=client, worker_id="bench", pool=socket_path)
    observed: list[Observation] = []
    try:
        started = time.monotonic()
        sandbox.open(run_id)
        sandbox.prestart(run_id, LIMITS, 1)
        taken = time.monotonic()
        for group in batches(specs, wave):
            observed += sandbox.run_batch(group, inputs)
        ran = time.monotonic()
        sandbox.close(run_id)
        closed = time.monotonic()
    finally:
        sweep(client, run_id)
    if sandbox._containers.pool_note or any(o.fault for o in observed):
        raise SystemExit(
            f"pooled run failed: {sandbox._containers.pool_note} {[o.fault for o in observed if o.fault][:1]}"
        )
    return {"total": closed - started, "take": taken - started, "trials": ran - taken, "close": closed - ran}


def split_main(args: argparse.Namespace) -> int:
    """Print the split per tree size, then the ratios, then the JSON of every figure."""
    client = docker_client()
    image_id = resolve_image_id(client, DEFAULT_IMAGE)
    rows = []
    server = None
    with tempfile.TemporaryDirectory(prefix="probegate-split-") as tmp_name:
        if args.pool:
            from worker.host.pool import PoolServer

            server = PoolServer(Path(tmp_name) / "pool.sock", size=1, client=client)
            server.start()
            server.want(image_id, LIMITS, DockerSandbox(client=client).work_copy()[0])
        try:
            for files in args.sizes or SIZES:
                tmp = Path(tmp_name) / str(files)
                tmp.mkdir()
                tree = make_tree(tmp / "tree", files)
                bench = tmp / "bench"
                bench.mkdir()
                n = args.trials
                got: dict[str, list] = {"bare": [], "split": [], "fresh": [], "pool": [], "warm": [], "parts": []}
                for _ in range(args.repeats):
                    if server is not None:
                        server.wait_full(timeout_s=60)  # no refill runs while anything is timed
                    run_id = f"bench-{uuid.uuid4().hex[:12]}"
                    try:
                        got["bare"].append(timed_bare_loop(client, image_id, tree, bench, n, run_id))
                    finally:
                        sweep(client, run_id)
                    if server is not None:
                        parts = pooled_fresh(client, tree, n, args.wave, server.path)
                        got["pool"].append(parts["total"])
                        got["parts"].append(parts)
                        server.wait_full(timeout_s=60)
                    got["split"].append(serial_split(client, tree, n, args.wave))
                    run_id = f"bench-{uuid.uuid4().hex[:12]}"
                    specs = make_specs(run_id, n, LIMITS)
                    try:
                        sandbox = DockerSandbox(client=client, worker_id="bench", pool="off")
                        got["fresh"].append(timed_sandbox(sandbox, specs, DirInputs(tree), args.wave, in_run=True))
                        sandbox = DockerSandbox(client=client, worker_id="bench", pool="off")
                        got["warm"].append(
                            timed_sandbox(sandbox, specs, DirInputs(tree), args.wave, in_run=True, warm=True)
                        )
                    finally:
                        sweep(client, run_id)
                split = min(got["split"], key=lambda s: s["total"])
                row = {"files": files, "n": n, "bare": min(got["bare"]), **{f"s_{k}": v for k, v in split.items()}}
                row.update(fresh=min(got["fresh"]), warm=min(got["warm"]), serial=split["total"])
                # Each round's bare loop against the same round's runs, the median over rounds: the machine
                # is shared, and a bare loop timed in a quiet minute flatters nothing timed in a busy one.
                for key in ("serial", "fresh", "pool", "warm"):
                    runs = [s["total"] for s in got["split"]] if key == "serial" else got[key]
                    if runs:
                        row[f"r_{key}"] = statistics.median(b / t for b, t in zip(got["bare"], runs, strict=True))
                row["rounds_s"] = {k: [round(v, 3) for v in got[k]] for k in ("bare", "fresh", "pool", "warm")}
                if got["pool"]:
                    row["pool"] = min(got["pool"])
                    best = min(got["parts"], key=lambda p: p["total"])
                    row.update({f"p_{k}": v for k, v in best.items()})
                rows.append(row)
                print_rows(row)
        finally:
            if server is not None:
                server.stop()
    print(json.dumps([{k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()} for row in rows]))
    return 0


STEPS = ("create", "start", "link", "tree", "clock", "lower", "dry", "first", "later", "close")


def print_rows(row: dict) -> None:
    """Two lines per size: the serial fresh run's steps in ms, then the ratios against the bare loop."""
    n, bare = row["n"], row["bare"]
    steps = "  ".join(f"{step} {1000 * row.get(f's_{step}', 0.0):.0f}" for step in STEPS)
    print(f"{row['files']:>6} files, {n} trials, bare {1000 * bare / n:.1f} ms/trial | steps ms: {steps}")
    once = row["s_total"] - row["s_later"] * n
    names = {"serial": "serial fresh", "fresh": "fresh", "pool": "fresh+pool", "warm": "warm"}
    best = "  ".join(f"{name} {bare / row[key]:.2f}" for key, name in names.items() if key in row)
    median = " ".join(f"{row[f'r_{key}']:.2f}" for key in names if f"r_{key}" in row)
    print(f"{'':>6} ratios vs bare, best of rounds: {best} | median of rounds: {median}", flush=True)
    print(f"{'':>6} fixed cost of the serial fresh run {1000 * once:.0f} ms", flush=True)
    if "p_total" in row:
        parts = "  ".join(f"{k} {1000 * row[f'p_{k}']:.0f}" for k in ("take", "trials", "close"))
        print(f"{'':>6} fresh+pool ms: {parts} (trials at the warm pace: {1000 * row['warm']:.0f})", flush=True)
