"""A worker that vanishes mid-run: the run ends within its normal time plus 30 s, with the same decisions.

A private redis-server and two enrolled `gate-worker serve` processes on real Docker (w1 and w2, each under
its own broker ACL user, concurrency 1 each unless `--concurrency`), driven by a `CeleryExecutor` reading the
registry, with the default result timeout (each trial's deadline + 5 s spread over the processes, + the 600 s
visibility timeout + 60 s: what a run would wait for a lost worker without heartbeats). Each round times two
runs of the same trials (same property ids, indices and seeds; a fresh run id each), open to close:

- the baseline: both workers up throughout;
- the loss: once `--lose-at` of the trials (a third) have come back, w2's whole process group is SIGKILLed
  and its containers removed, as a server powered off; the run is timed to its end, capped at `--cap` s
  (the benchmark cannot hang on a run that waits out the result timeout; a capped run is reported as such).

The probe prints a number drawn from its trial seed and exits 1 on one trial in five, so "the same decisions"
is a per-trial comparison that could fail: exit code, stdout and fault of every trial, by property and index,
between the two runs. Also printed: the trials each worker answered, the loss run's events (worker_gone,
batch_reassigned and the trials moved), when the loss happened and how long from it to worker_gone and to the
end. Between rounds w2 starts again with the same name, key and broker user; the batches it left on the broker
(queued on its direct queue or unacknowledged) are dropped first, so a round does not begin with it running
batches of a run that already ended (their answers would count nowhere).

    .venv/bin/python -m benchmarks.vanished_worker [--trials 800] [--repeat 2] [--concurrency 1] [--lose-at 0.33]
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import docker
import redis as redis_client

from benchmarks.common import bench_fleet
from gate.core.suite.plan import trial_seed
from gate.core.suite.trial import Limits, Observation, TrialSpec
from gate.core.testing import make_spec
from gate.io.keys import load_verify_key, public_path
from gate.io.snapshot import LocalInputs
from gate.io.workers import load_roster
from tests.support.servers import Workers
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.app import direct_queue, unacked_keys
from worker.host.engine import DEFAULT_IMAGE
from worker.host.sweep import sweep_dead_workers

NAMES = ("w1", "w2")  # enrolled as box-w1, box-w2
LOST = "w2"
SEED_ROOT = "vanished-worker-bench"  # every run's seeds, whatever its run id: both runs of a round run the same trials
DEADLINE_S = 10.0  # per trial, as benchmarks/dispatch_assigned.py; the default result timeout is derived from it
WITHIN_S = 30.0  # the claim: a run that loses a worker ends within its normal time plus this
PROBE = """import os, random, sys
rng = random.Random(int(os.environ["PROBEGATE_TRIAL_SEED"]))
drawn = rng.randrange(10**9)
print(drawn)
sys.exit(1 if drawn % 5 == 0 else 0)
"""


@dataclass
class Timed:
    """One run, open to close, on a thread (the main thread makes a worker vanish meanwhile)."""

    executor: CeleryExecutor
    run_id: str
    specs: list[TrialSpec]
    inputs: LocalInputs
    lose_after: int | None = None  # `reached` is set once this many observations came back
    observations: list[Observation] = field(default_factory=list)
    started: float = 0.0
    elapsed: float | None = None  # None until the run closed
    error: BaseException | None = None
    reached: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Timed:
        threading.Thread(target=self._run, name=f"run-{self.run_id}", daemon=True).start()
        return self

    def _run(self) -> None:
        self.started = time.monotonic()
        try:
            self.executor.open(self.run_id, Limits())
            try:
                for obs in self.executor.run(self.specs, self.inputs):
                    self.observations.append(obs)
                    if self.lose_after is not None and len(self.observations) >= self.lose_after:
                        self.reached.set()
            finally:
                self.executor.close(self.run_id)
            self.elapsed = time.monotonic() - self.started
        except BaseException as exc:
            self.error = exc
        finally:
            self.reached.set()
            self.ended.set()


@dataclass
class Loss:
    """What the loss run saw besides its observations."""

    at_s: float  # the kill, seconds into the run
    w2_answered: int  # trials w2 had answered when it was killed
    containers: int  # w2's containers removed with it
    gone_after_s: float | None  # from the kill until worker_gone was on the events (None: never)


def plan(n: int, run_id: str, inputs: LocalInputs, fixture_digest: str, image_id: str) -> list[TrialSpec]:
    """`n` trials over four properties; the seeds come from SEED_ROOT, so every run gets the same ones."""
    specs = []
    for i in range(n):
        prop = f"p{i * 4 // n}"
        specs.append(
            make_spec(
                i,
                run_id=run_id,
                property_id=prop,
                seed=trial_seed(SEED_ROOT, prop, i),
                tree_digest=inputs.tree_digest,
                fixture_digest=fixture_digest,
                deadline_s=DEADLINE_S,
                image_id=image_id,
            )
        )
    return specs


def executor_for(url: str, registry: Path) -> CeleryExecutor:
    """A fresh coordinator per run (its liveness and events start clean), with the default result timeout."""
    return CeleryExecutor(url, image=DEFAULT_IMAGE, worker_wait_s=60, enrolled=lambda: load_roster(registry))


def drop_left_batches(admin_url: str, queue: str) -> int:
    """Drop what a killed worker left on the broker: the batches still queued on its direct queue (moved
    elsewhere by then) and its unacknowledged ones (kept under its queue's name, restored to it after the
    visibility timeout). The number of keys deleted."""
    client = redis_client.Redis.from_url(admin_url)
    keys = [queue, *(f"{queue}\x06\x16{priority}" for priority in (3, 6, 9))]
    keys += [key for part, key in unacked_keys(queue).items() if not part.startswith("unacked_mutex")]
    return int(client.delete(*keys))


def outcomes(observations: list[Observation]) -> dict[tuple[str, int], tuple[int | None, bytes, str | None]]:
    """Each trial's outcome by property and index: exit code, stdout, fault."""
    return {(o.property_id, o.trial_index): (o.exit_code, o.stdout.data, o.fault) for o in observations}


def by_worker(observations: list[Observation]) -> str:
    counts = Counter(o.worker_id or "?" for o in observations)
    return "/".join(f"{counts[w]}" for w in sorted(counts)) + f" ({'/'.join(sorted(counts))})"


def one_round(
    round_: int,
    workers: Workers,
    url: str,
    registry: Path,
    inputs: LocalInputs,
    digest: str,
    client: docker.DockerClient,
    args: argparse.Namespace,
) -> dict:
    """Time the baseline and the loss run of one round; what the table prints."""
    row: dict = {"round": round_ + 1}
    baseline_exec = executor_for(url, registry)
    specs = plan(args.trials, f"base-{round_}", inputs, digest, baseline_exec.image_id())
    base = Timed(baseline_exec, f"base-{round_}", specs, inputs).start()
    if not base.ended.wait(args.cap):
        raise RuntimeError(f"the baseline run did not end within {args.cap:.0f} s")
    if base.error is not None:
        raise base.error
    row["baseline_s"] = base.elapsed
    row["baseline_split"] = by_worker(base.observations)
    row["baseline_faults"] = sum(1 for o in base.observations if o.fault)

    loss_exec = executor_for(url, registry)
    loss_id = f"loss-{round_}"
    specs = plan(args.trials, loss_id, inputs, digest, loss_exec.image_id())
    lose_after = max(1, round(args.trials * args.lose_at))
    loss = Timed(loss_exec, loss_id, specs, inputs, lose_after=lose_after).start()
    loss.reached.wait(args.cap)
    killed_at = time.monotonic()
    w2_answered = sum(1 for o in loss.observations if o.worker_id == f"box-{LOST}")
    removed = workers.vanish(LOST, client) if not loss.ended.is_set() else 0
    gone_at: float | None = None
    give_up = loss.started + args.cap
    while not loss.ended.is_set() and time.monotonic() < give_up:
        if gone_at is None and any(e.kind == "worker_gone" for e in list(loss_exec.events)):
            gone_at = time.monotonic()
        loss.ended.wait(0.05)
    if gone_at is None and any(e.kind == "worker_gone" for e in list(loss_exec.events)):
        gone_at = time.monotonic()  # seen only at the end (at most 50 ms late)
    row["loss"] = Loss(killed_at - loss.started, w2_answered, removed, gone_at - killed_at if gone_at else None)
    row["capped"] = not loss.ended.is_set()
    if row["capped"]:
        loss_exec.abort(loss_id)
        row["loss_s"] = None
        row["loss_to_end_s"] = None
    else:
        if loss.error is not None:
            raise loss.error
        row["loss_s"] = loss.elapsed
        row["loss_to_end_s"] = loss.started + loss.elapsed - killed_at
    row["loss_split"] = by_worker(loss.observations)
    row["loss_back"] = len(loss.observations)
    row["loss_faults"] = sum(1 for o in loss.observations if o.fault)
    events = list(loss_exec.events)
    row["events"] = Counter(e.kind for e in events)
    row["moved_trials"] = sum(
        int(m.group(1))
        for e in events
        if e.kind == "batch_reassigned" and (m := re.search(r"\((\d+) trials\)", e.detail))
    )
    row["gone_detail"] = [e.detail for e in events if e.kind == "worker_gone"]
    before, after = outcomes(base.observations), outcomes(loss.observations)
    differing = [key for key in before.keys() | after.keys() if before.get(key) != after.get(key)]
    row["same"] = (
        len(before) == len(after) == len(base.observations) == len(loss.observations) == args.trials and not differing
    )
    row["differing"] = sorted(differing)[:5]
    row["failing_trials"] = sum(1 for code, _, _ in before.values() if code)
    return row


def restart_lost(workers: Workers, url: str, client: docker.DockerClient, concurrency: int) -> None:
    """Start w2 again under the same name, key and broker user, after dropping what it left on the broker."""
    sweep_dead_workers(client)  # the killed worker's tree mounts and host dirs
    queue = direct_queue(load_verify_key(public_path(workers.key(LOST))).key_id)
    left = drop_left_batches(url, queue)
    print(f"  w2 starts again ({left} key(s) it left on the broker dropped)", file=sys.stderr)
    workers.start(LOST, concurrency=concurrency)
    workers.wait_ready()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=800)
    parser.add_argument("--repeat", type=int, default=2, help="rounds of baseline + loss")
    parser.add_argument("--concurrency", type=int, default=1, help="processes per worker")
    parser.add_argument("--lose-at", type=float, default=1 / 3, help="share of trials back when w2 is killed")
    parser.add_argument("--cap", type=float, default=300.0, help="the most a run is waited for, in s")
    args = parser.parse_args()

    rows: list[dict] = []
    with bench_fleet("vanished", PROBE, NAMES) as fleet:
        workers, client = fleet.workers, fleet.client
        for name in NAMES:
            workers.start(name, concurrency=args.concurrency)
        workers.wait_ready()
        with LocalInputs(fleet.tree, {fleet.digest: fleet.fixture}) as inputs:
            warm = executor_for(fleet.redis.url, fleet.registry)  # the image's id and its publication, once
            warm_run = Timed(warm, "warm", plan(8, "warm", inputs, fleet.digest, warm.image_id()), inputs).start()
            warm_run.ended.wait(args.cap)
            for round_ in range(args.repeat):
                if round_:
                    restart_lost(workers, fleet.redis.url, client, args.concurrency)
                row = one_round(round_, workers, fleet.redis.url, fleet.registry, inputs, fleet.digest, client, args)
                rows.append(row)
                report(row, file=sys.stderr)
                if row["capped"]:
                    print("  the loss run hit the cap: no further rounds", file=sys.stderr)
                    break

    print(
        f"{args.trials} trials a run ({DEADLINE_S:.0f} s deadline, default result timeout), 2 enrolled workers of "
        f"concurrency {args.concurrency} on Docker, w2 SIGKILLed once {args.lose_at:.2f} of the trials are back"
    )
    header = (
        f"{'round':>5}{'baseline s':>12}{'loss s':>9}{'loss-base':>11}{'<=30 s':>8}{'ratio':>7}{'lost at s':>11}"
        f"{'->gone s':>10}{'->end s':>9}{'moved':>7}{'same':>6}"
    )
    print(header)
    for row in rows:
        loss: Loss = row["loss"]
        if row["loss_s"] is None:
            print(
                f"{row['round']:>5}{row['baseline_s']:>12.1f}  capped: not ended {args.cap:.0f} s into the run "
                f"(w2 lost at {loss.at_s:.1f} s)"
            )
            continue
        extra = row["loss_s"] - row["baseline_s"]
        gone = f"{loss.gone_after_s:.1f}" if loss.gone_after_s is not None else "-"
        print(
            f"{row['round']:>5}{row['baseline_s']:>12.1f}{row['loss_s']:>9.1f}{extra:>+11.1f}"
            f"{'yes' if extra <= WITHIN_S else 'NO':>8}{row['loss_s'] / row['baseline_s']:>7.2f}{loss.at_s:>11.1f}"
            f"{gone:>10}{row['loss_to_end_s']:>9.1f}{row['moved_trials']:>7}{'yes' if row['same'] else 'NO':>6}"
        )
    return 0


def report(row: dict, file: TextIO) -> None:
    """One round's details, as it ends."""
    loss: Loss = row["loss"]
    events = ", ".join(f"{kind} x{count}" for kind, count in sorted(row["events"].items())) or "none"
    print(f"  round {row['round']}:", file=file)
    print(
        f"    baseline {row['baseline_s']:.1f} s, trials per worker {row['baseline_split']}, "
        f"faults {row['baseline_faults']}, trials exiting 1: {row['failing_trials']}",
        file=file,
    )
    took = "capped" if row["loss_s"] is None else f"{row['loss_s']:.1f} s"
    gone = f"{loss.gone_after_s:.1f} s" if loss.gone_after_s is not None else "not seen"
    print(
        f"    loss {took}: w2 killed {loss.at_s:.1f} s in (it had answered {loss.w2_answered}; {loss.containers} "
        f"container(s) removed), worker_gone {gone} after; trials per worker {row['loss_split']}, "
        f"faults {row['loss_faults']}",
        file=file,
    )
    print(f"    events: {events}; trials moved {row['moved_trials']}", file=file)
    for detail in row["gone_detail"]:
        print(f"    worker_gone: {detail}", file=file)
    same = "yes" if row["same"] else f"NO (first differing trials: {row['differing']})"
    if row["loss_s"] is None:
        same = f"not compared: the loss run was stopped at the cap with {row['loss_back']} trials back"
    print(f"    same outcome for every trial: {same}", file=file)


if __name__ == "__main__":
    sys.exit(main())
