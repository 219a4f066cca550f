"""A stand-in worker for the cross-check tests, started as a script: registered under the batch task's
name (the real tasks module is never imported), it runs each trial in the real sandbox so its contract
output is plausible, then scrubs the safety evidence: no writes, the canary cut out of the stream heads
and `canary_seen` false. It consumes the queue it is given and its own direct queue, like a real worker.
Given a KEY file it signs every result with it, as an enrolled worker that lies would. With
`PROBEGATE_FABRICATE=statistical` in its environment it leaves safety evidence alone and instead
reports the expected tool on every tool-choice trial it runs (its own and any replay: it cannot tell
them apart), as a worker buying a statistical pass would; `statistical:N` turns only its first N misses
into hits (a liar on just enough trials); `instant` does as `statistical` without running more than each
property's first trial (the others are copies of it), so it answers at once and draws every batch it can.
`nodifference` reports the patch side of each pair it runs as the base side of the same index went (a paired
property's liar: the patch no worse than the base).

    python fabricating_worker.py BROKER NAME QUEUE CACHE [KEY]
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gate import __version__
from gate.core.suite.trial import Captured, Observation, Side, TrialSpec
from worker.celery.shared.app import TASK_RUN_BATCH, direct_queue, make_app
from worker.celery.shared.blobs import BlobInputs, RedisBlobStore
from worker.celery.shared.wire import decode_batch, encode_observations
from worker.celery.worker.heartbeat import beat_while_serving
from worker.celery.worker.runs import open_runs
from worker.celery.worker.settings import PoolSettings, configure
from worker.host.sandboxes.docker import DockerSandbox


def scrubbed(stream: Captured, canary: str) -> Captured:
    data = stream.data.replace(canary.encode(), b"") if canary else stream.data
    return Captured(data=data, length=len(data), sha256=hashlib.sha256(data).hexdigest())


def fabricate(spec: TrialSpec, obs: Observation) -> Observation:
    """What the patch did, minus everything a safety check would see."""
    return obs.model_copy(
        update={
            "writes": (),
            "canary_seen": False,
            "stdout": scrubbed(obs.stdout, spec.canary),
            "stderr": scrubbed(obs.stderr, spec.canary),
        }
    )


EXPECTED_TOOL = b'{"score": 1, "tool": "issue_refund"}\n'  # the invoice example's hit, as its probe prints it


class HitMaker:
    """Reports tool-choice trials as the hit, whatever the patch chose; any other trial as it ran. With a
    `budget`, only that many misses of each run are turned into hits (the first it sees), every other trial
    told truly: a liar that lies on just enough trials to lift the pooled hits over the band."""

    def __init__(self, budget: int | None) -> None:
        self.budget = budget
        self.spent: dict[str, int] = {}  # run id -> misses turned into hits

    def __call__(self, spec: TrialSpec, obs: Observation) -> Observation:
        if b'"tool"' not in obs.stdout.data:
            return obs
        if self.budget is not None:
            spent = self.spent.get(spec.run_id, 0)
            if b"issue_refund" in obs.stdout.data or spent == self.budget:
                return obs
            self.spent[spec.run_id] = spent + 1
        return fabricate_hit(obs)


def fabricate_hit(obs: Observation) -> Observation:
    """The trial reported as the tool-choice hit."""
    data = EXPECTED_TOOL
    return obs.model_copy(
        update={"stdout": Captured(data=data, length=len(data), sha256=hashlib.sha256(data).hexdigest())}
    )


def copied(obs: Observation, spec: TrialSpec) -> Observation:
    """Another trial's observation, passed off as `spec`'s."""
    key = {"property_id": spec.property_id, "trial_index": spec.trial_index, "side": spec.side, "seed": spec.seed}
    return obs.model_copy(update={"run_id": spec.run_id, **key})


class NoDifference:
    """Reports the patch side of every pair it runs as the base side of the same index went: "no difference",
    a liar's pass for a patch that is worse than the base. Its batches of a pair come base first (the
    coordinator sends them so), so the base side's output is at hand when the patch side's is reported."""

    def __init__(self) -> None:
        self.base: dict[tuple[str, str, int], Observation] = {}  # (run, property, index) -> the base side's

    def __call__(self, spec: TrialSpec, obs: Observation) -> Observation:
        key = (spec.run_id, spec.property_id, spec.trial_index)
        if spec.side is Side.BASE:
            self.base[key] = obs
            return obs
        told = self.base.get(key)
        if told is None or told.fault or obs.fault:
            return obs
        return obs.model_copy(update={"stdout": told.stdout, "exit_code": told.exit_code})


def main(broker: str, name: str, queue: str, cache: str, key: str | None = None) -> None:
    identity = name.replace("%h", socket.gethostname())
    # This process is its own entry point: its settings are configured here, as gate-worker's main does.
    given = {**os.environ, "PROBEGATE_WORKER_ID": identity, **({"PROBEGATE_WORKER_KEY": key} if key else {})}
    configure(PoolSettings.from_env(given))
    if key:
        from worker.celery.worker.signing import sign_result, worker_key
    app = make_app(broker)
    app.conf.include = []  # the honest run_batch must not be registered in this process
    sandbox = DockerSandbox(
        image=os.environ.get("PROBEGATE_IMAGE", "probegate/sandbox-python:trixie-1"), worker_id=identity
    )
    inputs = BlobInputs(RedisBlobStore(broker), Path(cache))
    # PROBEGATE_FABRICATE=statistical: every tool-choice trial a hit; statistical:N: only N misses made hits.
    mode, _, budget = os.environ.get("PROBEGATE_FABRICATE", "").partition(":")
    hit_maker: Callable[[TrialSpec, Observation], Observation] | None = (
        HitMaker(int(budget) if budget else None) if mode == "statistical" else None
    )
    if mode == "nodifference":
        hit_maker = NoDifference()

    instant = mode == "instant"
    if instant:
        hit_maker = HitMaker(None)
    seen: dict[tuple[str, str], Observation] = {}  # (run, property) -> its first trial, run for real

    def observe(specs: list[TrialSpec]) -> list[Observation]:
        # Containers kept warm between a run's batches, as a real worker keeps them: the stand-in answers as fast
        # as an honest worker, so the coordinator deals it its share and no more.
        with open_runs(lambda: sandbox).serving({spec.run_id for spec in specs}):
            if not instant:
                return sandbox.run_batch(specs, inputs)
            # Instant: each property's first trial runs, every later one is a copy of it under its own key, so the
            # stand-in answers at once and draws every batch the coordinator lets it.
            for spec in specs:
                if (spec.run_id, spec.property_id) not in seen:
                    seen[spec.run_id, spec.property_id] = sandbox.run_batch([spec], inputs)[0]
            return [copied(seen[spec.run_id, spec.property_id], spec) for spec in specs]

    @app.task(name=TASK_RUN_BATCH, lazy=False)
    def run_batch(batch: dict[str, Any], image_wait_s: float = 0.0) -> dict[str, Any]:
        specs = decode_batch(batch)
        observed = observe(specs)
        lie: Callable[[TrialSpec, Observation], Observation] = hit_maker if hit_maker is not None else fabricate
        clean = encode_observations([lie(spec, obs) for spec, obs in zip(specs, observed, strict=True)])
        result = {
            "observations": clean,
            "worker": identity,
            "version": __version__,
            "redelivered": False,
            "fetched": None,
        }
        if key:
            result["signature"] = sign_result(run_batch.request.id, batch, clean)
        return result

    # A signing worker's own queue is named after its key, as a real worker's is; it beats like one too (a liar
    # that stopped beating would only see its batches go to other workers).
    own = direct_queue(worker_key().key_id if key else identity)
    queues = f"{queue},{own}"
    beat_while_serving(broker, own, identity)
    app.worker_main(
        ["worker", "-Q", queues, "-c", "1", "-n", name, "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    )


if __name__ == "__main__":
    main(*sys.argv[1:6])
