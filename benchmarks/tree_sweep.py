"""Trial overhead against tree size, in both work copy modes, in one run (issue 13):

    .venv/bin/python benchmarks/trial_overhead.py --sweep [--trials 40] [--wave 5] [--repeats 1]

For trees of 0, 300, 3,000 and 30,000 files of 1.2 KB beside the probe, the bare loop of the probe
inside one container, then per mode a warm run (waves of --wave trials in a
container already started) and a fresh run (open .. close, one prestarted container), as ratios
against the bare loop. The per-trial split comes from the supervisor's own step timings in its
report lines: layer (lay the copy out, or mount the overlay), probe, detect (find the writes),
reset (wipe the copy, or discard the overlay), and the once-per-container setup (overlay mode's
lower copy and dry run). Copy mode at 30,000 files costs over a second per trial, so it runs
--trials // 4 trials there (the `n` column says how many).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import uuid
from pathlib import Path

from sandbox_timing import DirInputs, make_specs, make_tree, timed_bare_loop, timed_sandbox

from gate.core.suite.trial import Limits, Observation, TrialSpec
from worker.host.engine import DEFAULT_IMAGE, docker_client, resolve_image_id
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import sweep

SIZES = (0, 300, 3_000, 30_000)
# 30,000 files take 117 MiB of tmpfs pages: every size gets room for that, so limits never differ.
LIMITS = Limits(tmpfs_mb=160, memory_mb=512, tree_files=40_000)
STEPS = ("layer", "probe", "detect", "reset")
MODES = ("overlay", "copy")


class StepSandbox(DockerSandbox):
    """A DockerSandbox that keeps each report's step timings (benchmark only)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.steps: list[dict[str, float]] = []

    def _observation(self, spec: TrialSpec, image_id: str, report: dict, note: str = "") -> Observation:
        self.steps.append(dict(report.get("steps_s") or {}))
        obs = super()._observation(spec, image_id, report, note)
        if obs.work_copy is not self._wanted[0]:
            raise SystemExit(f"asked for {self._wanted[0]}, ran {obs.work_copy}: {obs.work_copy_note}")
        return obs


def one_round(client, tree: Path, mode: str, n: int, wave: int) -> tuple[float, float, list[dict], float]:
    """One warm and one fresh run of `n` trials in `mode`: their seconds, the warm waves' step
    timings, and the fresh run's container setup."""
    inputs = DirInputs(tree)
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    specs = make_specs(run_id, n, LIMITS)
    try:
        sandbox = StepSandbox(client=client, worker_id="bench", work_copy=mode)
        warm = timed_sandbox(sandbox, specs, inputs, wave, in_run=True, warm=True)
        steps = sandbox.steps[min(wave, n) :]  # the timed waves only
        sandbox = StepSandbox(client=client, worker_id="bench", work_copy=mode)
        fresh = timed_sandbox(sandbox, specs, inputs, wave, in_run=True)
        setup = max(s.get("setup", 0.0) for s in sandbox.steps)
    finally:
        sweep(client, run_id)
    return warm, fresh, steps, setup


def sweep_main(args: argparse.Namespace) -> int:
    """Print one row per tree size and mode, then the JSON of every figure. Per size the bare loop
    and both modes run in interleaved rounds, each keeping its best: a noisy stretch of the machine
    hits them alike."""
    client = docker_client()
    image_id = resolve_image_id(client, DEFAULT_IMAGE)
    rows = []
    with tempfile.TemporaryDirectory(prefix="probegate-sweep-") as tmp_name:
        for files in SIZES:
            tmp = Path(tmp_name) / str(files)
            tmp.mkdir()
            tree = make_tree(tmp / "tree", files)
            bench = tmp / "bench"
            bench.mkdir()
            counts = {mode: args.trials // 4 if (mode == "copy" and files >= 30_000) else args.trials for mode in MODES}
            bare: list[float] = []
            found: dict[str, dict[str, list]] = {m: {"warm": [], "fresh": [], "steps": [], "setup": []} for m in MODES}
            for _ in range(args.repeats):
                run_id = f"bench-{uuid.uuid4().hex[:12]}"
                try:
                    bare.append(timed_bare_loop(client, image_id, tree, bench, args.trials, run_id) / args.trials)
                finally:
                    sweep(client, run_id)
                for mode in MODES:
                    warm, fresh, steps, setup = one_round(client, tree, mode, counts[mode], args.wave)
                    for key, value in (("warm", warm), ("fresh", fresh), ("setup", setup)):
                        found[mode][key].append(value)
                    found[mode]["steps"] += steps
            per_bare = min(bare)
            for mode in MODES:
                got = found[mode]
                split = {step: statistics.fmean(s[step] for s in got["steps"]) for step in STEPS}
                row = {"files": files, "mode": mode, "bare_ms": 1000 * per_bare, "n": counts[mode]}
                row.update(warm=min(got["warm"]), fresh=min(got["fresh"]), setup=min(got["setup"]), **split)
                rows.append(row)
                print_row(row, per_bare, flush=True)
    print(json.dumps([{k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()} for row in rows]))
    return 0


HEADER = (
    f"{'files':>6} {'mode':8} {'n':>3} {'bare ms':>8} {'warm ms':>8} {'warm':>5} {'fresh':>6} "
    f"{'setup ms':>9} {'layer':>7} {'probe':>7} {'detect':>7} {'reset':>7}   (per-trial steps in ms)"
)


def print_row(row: dict, per_bare: float, *, flush: bool = False) -> None:
    """One line: ratios of warm and fresh runs against the bare loop, and the step split."""
    if row["files"] == SIZES[0] and row["mode"] == "overlay":
        print(HEADER)
    n = row["n"]
    warm, fresh = row["warm"] / n, row["fresh"] / n
    steps = " ".join(f"{1000 * row[step]:7.2f}" for step in STEPS)
    print(
        f"{row['files']:>6} {row['mode']:8} {n:>3} {1000 * per_bare:8.1f} {1000 * warm:8.1f} "
        f"{per_bare / warm:5.2f} {per_bare / fresh:6.2f} {1000 * row['setup']:9.1f} {steps}",
        flush=flush,
    )
