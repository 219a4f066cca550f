"""Dispatch bookkeeping: trials/s through the local pool and through Celery over Redis, in one run.

Trials are trivial (no container: workers run `gate-worker serve --sandbox stub`), so what is
measured is the cost of planning, shipping, gathering and de-duplicating results — the overhead a
broker adds on top of the trial work. Prints both rates and their ratio (Celery / local), then the
cost of cross-checks: the same Celery run as safety trials plus the cross-check step at a share of
0%, 5% and 100%, each as a ratio of wall time to the run without the step.

Signed results, in the same run: Celery again with a worker registry (every result's signature
checked, gate.core.trust.enrolment) against Celery without one, as trials/s and as a ratio; and the cost
of signing plus verifying one batch's result, timed alone, as a ratio to the unsigned path's whole
round trip per batch (the unverified Celery run's time divided by its batches). Workers sign
every result whatever the coordinator checks, so the end-to-end ratio shows the verifying side
and the per-batch ratio both.

    .venv/bin/python -m benchmarks.dispatch [--trials 10000] [--workers 2] [--repeat 3]
    .venv/bin/python -m benchmarks.dispatch --assigned [TRIALS]   # coordinator-chosen workers against
                                                                  # the shared queue, real Docker (160)

Starts its own redis-server on a free 127.0.0.1 port and stops it, and its workers, at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.common import dispatch_specs, enrolled_roster
from gate.core.suite.fold import Tally
from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import Observation
from gate.core.testing import make_spec
from gate.core.trust.enrolment import EnrolledWorker, Roster, check_result, spec_digest
from gate.core.verdicts.verdict import Outcome, OutcomeKind
from gate.io.keys import SigningKey
from gate.io.snapshot import LocalInputs
from gate.io.workers import verify_pem
from gate.run.crosscheck import cross_check, new_seed
from gate.run.executors.local import LocalExecutor
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.wire import encode_batch, encode_observations
from worker.celery.worker.signing import sign_result
from worker.host.sandboxes.stub import StubSandbox


def timed(executor, plan, inputs) -> float:
    started = time.perf_counter()
    seen = {obs.key: obs for obs in executor.run(plan, inputs)}
    elapsed = time.perf_counter() - started
    assert len(seen) == len(plan), f"{len(seen)} of {len(plan)} trials came back"
    return len(plan) / elapsed


SHARES = (0.0, 0.05, 1.0)


def hit(prop: PropertySpec, obs: Observation) -> Outcome:
    return Outcome(trial_index=obs.trial_index, kind=OutcomeKind.HIT)


def checked_run(executor, plan, inputs, share: float | None) -> tuple[float, int]:
    """Seconds for the primary run and, unless `share` is None, the cross-check step; trials checked."""
    started = time.perf_counter()
    tallies = {}
    for spec in plan:
        prop = PropertySpec(id=spec.property_id, band="safety", fixture="f.json", check="builtin:exits_zero")
        tallies.setdefault(spec.property_id, Tally(prop)).dispatched += 1
    sent = {spec.key: spec for spec in plan}
    for obs in executor.run(plan, inputs):
        tally = tallies[obs.property_id]
        tally.add(obs, hit(tally.prop, obs))
    checked = 0
    if share is not None:
        step = cross_check(executor, list(tallies.values()), sent, inputs, hit, share=share, seed=new_seed())
        checked = step.summary.checked
    return time.perf_counter() - started, checked


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2, help="gate-worker processes (concurrency 1 each)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per executor, interleaved; the median is reported")
    parser.add_argument("--batch", type=int, help="trials per Celery task (default: the executor's own sizing)")
    parser.add_argument("--check-trials", type=int, default=2000, help="trials per cross-check run (default 2000)")
    parser.add_argument(
        "--assigned", nargs="?", type=int, const=160, metavar="TRIALS",
        help="only: trials/s with enrolled workers the coordinator assigns against the shared queue (Docker)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.assigned:
        from benchmarks.dispatch_assigned import main as assigned

        return assigned(args.assigned, args.repeat if "--repeat" in sys.argv else 3)
    redis_bin = shutil.which("redis-server")
    if redis_bin is None:
        print("redis-server is not installed (deploy/provision.sh installs it)", file=sys.stderr)
        return 69

    tmp = Path(tempfile.mkdtemp(prefix="probegate-bench-"))
    (tmp / "tree").mkdir()
    (tmp / "tree" / "probe.py").write_text("print('{}')\n")
    fixture = b"{}"
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    redis = subprocess.Popen(
        [redis_bin, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp)],
        stdout=subprocess.DEVNULL,
    )
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "worker.celery.worker.cli",
                "serve",
                "--broker",
                url,
                "--sandbox",
                "stub",
                "--concurrency",
                "1",
                "--name",
                f"bench{i}@%h",
                "--cache",
                str(tmp / f"cache{i}"),
                "--key",
                str(tmp / f"key{i}"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for i in range(args.workers)
    ]
    try:
        with LocalInputs(tmp / "tree", {hashlib.sha256(fixture).hexdigest(): fixture}) as inputs:
            digest = hashlib.sha256(fixture).hexdigest()
            local = LocalExecutor(StubSandbox())
            celery = CeleryExecutor(
                url, image="probegate/sandbox-python:trixie-1", worker_wait_s=60, batch_size=args.batch
            )
            discovered = time.perf_counter()
            processes = celery.discover()
            discovery_s = time.perf_counter() - discovered
            roster = enrolled_roster([tmp / f"key{i}.pub" for i in range(args.workers)])
            signed = CeleryExecutor(
                url, image="probegate/sandbox-python:trixie-1", worker_wait_s=60, batch_size=args.batch,
                enrolled=lambda: roster,
            )  # fmt: skip
            signed.discover()
            local_rates, celery_rates, signed_rates, batches = [], [], [], []
            for round_ in range(args.repeat):
                plan = dispatch_specs(args.trials, inputs.tree_digest, digest, f"bench-{round_}")
                local_rates.append(timed(local, plan, inputs))
                issued = len(celery.answers.issued)
                celery_rates.append(timed(celery, plan, inputs))
                batches.append(len(celery.answers.issued) - issued)
                plan = dispatch_specs(args.trials, inputs.tree_digest, digest, f"bench-signed-{round_}")
                signed_rates.append(timed(signed, plan, inputs))
                assert not signed.events, signed.events[:3]  # every result verified
            per_batch = statistics.median(batches)
            sign_s, verify_s = sign_and_verify(args.trials // max(1, per_batch))
            # Cross-checks: each share's run against a run without the step, interleaved like the above.
            asked = time.perf_counter()
            celery.direct_queues()  # asked once per coordinator, like `discover`: not a per-run cost
            direct_s = time.perf_counter() - asked
            took: dict[float | None, list[float]] = {share: [] for share in (None, *SHARES)}
            checked: dict[float | None, int] = {}
            for round_ in range(args.repeat):
                # The order rotates each round, so warming up favours no share.
                order = [None, *SHARES]
                order = order[round_ % len(order) :] + order[: round_ % len(order)]
                for share in order:
                    plan = dispatch_specs(args.check_trials, inputs.tree_digest, digest, f"bench-x-{round_}-{share}")
                    seconds, checked[share] = checked_run(celery, plan, inputs, share)
                    took[share].append(seconds)
    finally:
        for proc in workers:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in workers:
            proc.wait(timeout=30)
        redis.terminate()
        redis.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)

    best_local, best_celery = statistics.median(local_rates), statistics.median(celery_rates)
    print(f"trials per run          {args.trials}")
    print(f"worker processes        {processes} (found in {discovery_s:.2f}s, once per coordinator)")
    print(f"local pool (median)     {best_local:10,.0f} trials/s  (runs: {_rates(local_rates)})")
    print(f"celery (median)         {best_celery:10,.0f} trials/s  (runs: {_rates(celery_rates)})")
    print(f"ratio celery/local      {best_celery / best_local:10.2f}")
    best_signed = statistics.median(signed_rates)
    unsigned_batch_s = args.trials / best_celery / per_batch
    print(f"celery verified (median){best_signed:10,.0f} trials/s  (runs: {_rates(signed_rates)})")
    print(f"ratio verified/unverified{best_signed / best_celery:9.2f}")
    print(f"batches per run         {per_batch} ({args.trials // max(1, per_batch)} trials each)")
    print(
        f"sign+verify per batch   {(sign_s + verify_s) * 1e6:10,.0f} µs  (sign {sign_s * 1e6:,.0f} µs on the worker, "
        f"verify {verify_s * 1e6:,.0f} µs on the coordinator)"
    )
    print(f"unsigned batch (median) {unsigned_batch_s * 1e6:10,.0f} µs  (a whole round trip: run time / batches)")
    print(f"ratio sign+verify/batch {(sign_s + verify_s) / unsigned_batch_s:10.3f}")
    base = statistics.median(took[None])
    print(f"cross-check runs        {args.check_trials} safety trials; without the step {base:.2f}s (median)")
    print(f"direct queues           found in {direct_s:.2f}s, once per coordinator")
    for share in SHARES:
        median = statistics.median(took[share])
        line = f"cross-check {share:>4.0%}       {median / base:10.2f} x the run without the step"
        print(f"{line}  ({checked[share]} trials ran again, {median:.2f}s)")
    return 0


def sign_and_verify(size: int, rounds: int = 200) -> tuple[float, float]:
    """Seconds to sign one batch's result of `size` observations, and to verify it, medians of `rounds`."""
    import worker.celery.worker.signing as signing

    signing._key = key = SigningKey.generate()
    batch = [make_spec(i, run_id="sig", tree_digest="t", fixture_digest="f") for i in range(size)]
    payload = encode_batch(batch)
    observations = encode_observations(StubSandbox().run_batch(batch, inputs=None))  # type: ignore[arg-type]
    roster = Roster(
        workers=(
            EnrolledWorker(
                name="w", key_id=key.key_id, public_key=key.public().pem().decode(), enrolled_at=datetime.now(UTC)
            ),
        )
    )
    signs, verifies = [], []
    for i in range(rounds):
        started = time.perf_counter()
        claim = sign_result(f"task-{i}", payload, observations)
        signed_at = time.perf_counter()
        # The coordinator's side: the digest of what it sent (taken in _send), then the check.
        checked = check_result(
            roster, {f"task-{i}": spec_digest(payload)}, f"task-{i}", observations, claim, verify_pem
        )
        done = time.perf_counter()
        assert isinstance(checked, EnrolledWorker)
        signs.append(signed_at - started)
        verifies.append(done - signed_at)
    return statistics.median(signs), statistics.median(verifies)


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{r:,.0f}" for r in rates)


if __name__ == "__main__":
    sys.exit(main())
