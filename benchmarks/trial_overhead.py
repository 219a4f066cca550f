"""Trial overhead: throughput of batch mode, of a container per trial, and of a bare loop of the
same trivial probe inside one already-running container, in one run, as ratios vs the bare loop.

    .venv/bin/python -m benchmarks.trial_overhead [--trials 40] [--batch 40] [--wave 5] [--repeats 3]
                                                  [--tree-files 0] [--work-copy overlay|copy]
    .venv/bin/python -m benchmarks.trial_overhead --sweep [--trials 40] [--repeats 1]
    .venv/bin/python -m benchmarks.trial_overhead --fresh-split [--trials 40] [--repeats 1] [--pool]

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
--fresh-split (fresh_split.py) times each step of a fresh run at 0, 3,000 and 30,000 files, and with
--pool also a fresh run whose container comes from a standing pool (worker/host/pool.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from pathlib import Path

from benchmarks.common import DirInputs, make_specs, make_tree, timed_bare_loop, timed_sandbox
from worker.host.engine import DEFAULT_IMAGE, docker_client, resolve_image_id
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import sweep


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--batch", type=int, default=40, help="trials per run_batch call in single-batch mode")
    parser.add_argument("--wave", type=int, default=5, help="trials per run_batch call within one open run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; each mode's best counts")
    parser.add_argument("--tree-files", type=int, default=0, help="extra 1.2 KB files in the tree beside probe.py")
    parser.add_argument("--work-copy", choices=("overlay", "copy"), help="the sandbox's work copy mode")
    parser.add_argument("--sweep", action="store_true", help="tree sizes 0..30,000 in both modes (tree_sweep.py)")
    parser.add_argument("--fresh-split", action="store_true", help="each step of a fresh run (fresh_split.py)")
    parser.add_argument("--pool", action="store_true", help="with --fresh-split: also fresh runs from a pool")
    parser.add_argument("--sizes", type=int, nargs="+", help="with --fresh-split: tree sizes (default 0 3000 30000)")
    args = parser.parse_args(argv)
    if args.fresh_split:
        from benchmarks.fresh_split import split_main

        return split_main(args)
    if args.sweep:
        from benchmarks.tree_sweep import sweep_main

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
