"""Trial overhead against tree size, in both work copy modes, in one run (issue 13):

    .venv/bin/python benchmarks/trial_overhead.py --sweep [--trials 40] [--wave 5] [--repeats 1]

For trees of 0, 300, 3,000 and 30,000 files of 1.2 KB beside the probe, the bare loop of the probe
inside one container (timed once per size), then per mode a warm run (waves of --wave trials in a
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

from trial_overhead import DirInputs, make_specs, make_tree, timed_bare_loop, timed_sandbox

from gate.core.trial import Limits, Observation, TrialSpec
from worker.host.engine import DEFAULT_IMAGE, docker_client, resolve_image_id
from worker.host.sandbox import DockerSandbox
from worker.host.sweep import sweep

SIZES = (0, 300, 3_000, 30_000)
# 30,000 files take 117 MiB of tmpfs pages: every size gets room for that, so limits never differ.
LIMITS = Limits(tmpfs_mb=160, memory_mb=512, tree_files=40_000)
STEPS = ("layer", "probe", "detect", "reset")


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


def measure(client, image_id: str, tree: Path, bench: Path, mode: str, n: int, wave: int, repeats: int) -> dict:
    """Warm and fresh seconds (best of `repeats`) and the warm runs' mean step timings for one mode."""
    inputs = DirInputs(tree)
    warm_s, fresh_s, steps = [], [], []
    for _ in range(repeats):
        run_id = f"bench-{uuid.uuid4().hex[:12]}"
        specs = make_specs(run_id, n, LIMITS)
        try:
            sandbox = StepSandbox(client=client, worker_id="bench", work_copy=mode)
            warm_s.append(timed_sandbox(sandbox, specs, inputs, wave, in_run=True, warm=True))
            steps += sandbox.steps[min(wave, n) :]  # the timed waves only
            sandbox = StepSandbox(client=client, worker_id="bench", work_copy=mode)
            fresh_s.append(timed_sandbox(sandbox, specs, inputs, wave, in_run=True))
            setup = max(s.get("setup", 0.0) for s in sandbox.steps)
        finally:
            sweep(client, run_id)
    split = {step: statistics.fmean(s[step] for s in steps) for step in STEPS}
    return {"n": n, "warm": min(warm_s), "fresh": min(fresh_s), "setup": setup, **split}


def sweep_main(args: argparse.Namespace) -> int:
    """Print one row per tree size and mode, then the JSON of every figure."""
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
            run_id = f"bench-{uuid.uuid4().hex[:12]}"
            try:
                bare = min(timed_bare_loop(client, image_id, tree, bench, args.trials, run_id) for _ in range(2))
            finally:
                sweep(client, run_id)
            per_bare = bare / args.trials
            for mode in ("overlay", "copy"):
                n = args.trials // 4 if (mode == "copy" and files >= 30_000) else args.trials
                found = measure(client, image_id, tree, bench, mode, n, args.wave, args.repeats)
                rows.append({"files": files, "mode": mode, "bare_ms": 1000 * per_bare, **found})
                print_row(rows[-1], per_bare, flush=True)
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
