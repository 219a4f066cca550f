"""The worker's tasks. `probegate.run_batch` runs trial specs through this machine's sandbox and
returns observations; it runs no suite or check code and judges nothing. Inputs are fetched by
digest from the blob store and verified before any trial sees them; so is the run's image when
this engine lacks it (see worker.celery.worker.imagefetch). Each batch's run stays open in this process's sandbox
(warm containers) until it has been idle a while (see worker.celery.worker.runs).

A pool process proves its worker's default image (the preflight container) as soon as it starts, in the
background, so a run's first batch does not wait for it; a batch that arrives first waits for that proof.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import socket
import threading
from pathlib import Path
from typing import Any

import docker
from celery import shared_task
from celery.exceptions import Reject, SoftTimeLimitExceeded
from celery.signals import worker_process_init, worker_process_shutdown

from gate import __version__
from gate.core.errors import GateError
from gate.core.suite.sandbox import Sandbox
from gate.core.suite.trial import FaultOrigin, Observation, TrialSpec
from worker.celery.shared.app import TASK_RESEAL, TASK_RUN_BATCH
from worker.celery.shared.blobs import BlobInputs, RedisBlobStore
from worker.celery.shared.results import flush_results
from worker.celery.shared.wire import decode_batch, encode_observations, version_refusal
from worker.celery.worker.imagefetch import Fetched, ensure_image
from worker.celery.worker.runs import open_runs  # also registers the close-run control command in the worker
from worker.celery.worker.settings import current
from worker.celery.worker.signing import sign_result
from worker.celery.worker.stopping import WorkerStopping, stoppable  # also: a shutting-down worker stops its batches

RESULTS_FLUSH_S = 10.0  # the most an exiting pool process waits to store the results it still holds
MAX_IMAGE_WAIT_S = 600.0  # whatever a message asks, a pool process waits no longer for a publication
_sandbox: Sandbox | None = None
_inputs: BlobInputs | None = None
_engine: docker.DockerClient | None = None
_proven: set[str] = set()  # image IDs this process's preflight passed
_proving = threading.Lock()  # one proof at a time: a batch waits for the start-up proof of its image


def worker_id() -> str:
    return current().worker_id or f"{socket.gethostname()}-{os.getpid()}"


def sandbox() -> Sandbox:
    """This process's sandbox, made on first use (a Docker client must not cross a fork)."""
    global _sandbox
    if _sandbox is None:
        settings = current()
        if settings.stub_sandbox:
            from worker.host.sandboxes.stub import StubSandbox

            _sandbox = StubSandbox(worker_id=worker_id())
        else:
            from worker.host.sandboxes.docker import DockerSandbox

            image = settings.image
            chosen = {"image": image} if image else {}
            _sandbox = DockerSandbox(worker_id=worker_id(), host=settings.host, **chosen)
    return _sandbox


def inputs() -> BlobInputs:
    global _inputs
    if _inputs is None:
        settings = current()
        _inputs = BlobInputs(RedisBlobStore(settings.blobs or settings.broker), cache_dir())
    return _inputs


def cache_dir() -> Path:
    return current().cache


def fetch_image(spec: TrialSpec, wait_s: float) -> Fetched | None:
    """Make the run's image present on this engine (None: it was, or trials run in no container);
    `wait_s`: how long its publication may still take (see worker.celery.worker.imagefetch.ensure_image)."""
    global _engine
    if not spec.image_id or current().stub_sandbox:
        return None
    if _engine is None:
        from worker.host.engine import docker_client

        with _proving:  # the start-up proof may be making it
            _engine = _engine or docker_client()
    registry = current().registry
    spool = cache_dir() / "images"
    fetched = ensure_image(
        _engine, inputs().store, spec.image_id, registry=registry, spool=spool, run_id=spec.run_id, wait_s=wait_s
    )
    prove(_engine, spec.image_id)
    return fetched


def prove(engine: docker.DockerClient, image_id: str) -> None:
    """Whoever sent the spec, no trial runs in an image this process has not preflighted itself (its
    environment, user, entrypoint, volumes, and the frozen clock and closed network inside)."""
    with _proving:
        if image_id not in _proven:
            from worker.host.preflight import prove_image

            prove_image(engine, image_id)
            _proven.add(image_id)


@worker_process_init.connect
def _prove_default_image_early(**_: Any) -> None:
    # Celery gives this hook a few seconds at most: the proof runs in a thread. A batch arriving first
    # waits on the lock for it instead of running a second one (or proves its own image itself).
    if not current().stub_sandbox:
        threading.Thread(target=_prove_default_image, name="probegate-prove", daemon=True).start()


@worker_process_shutdown.connect
def _store_results_left(**_: Any) -> None:
    # Results go out on a thread of their own (worker.celery.shared.results): none is left behind at exit.
    flush_results(RESULTS_FLUSH_S)


def _prove_default_image() -> None:
    """Prove the worker's default image; a failure is left for the first batch to meet and report."""
    global _engine
    with contextlib.suppress(Exception):
        from worker.host.engine import DEFAULT_IMAGE, docker_client, resolve_image_id

        with _proving:
            _engine = _engine or docker_client()
        prove(_engine, resolve_image_id(_engine, current().image or DEFAULT_IMAGE))


def bounded_wait(value: object) -> float:
    """A message's image wait as seconds in [0, MAX_IMAGE_WAIT_S] (anything else, e.g. NaN, is 0)."""
    wait = float(value) if isinstance(value, int | float) else 0.0
    return min(wait, MAX_IMAGE_WAIT_S) if math.isfinite(wait) and wait > 0 else 0.0


@shared_task(name=TASK_RUN_BATCH, bind=True, Request="worker.celery.worker.requests:BatchRequest")
def run_batch(self: Any, batch: dict[str, Any], image_wait_s: float = 0.0) -> dict[str, Any]:
    """Run a batch of trial specs; returns the observations, signed with this worker's key over this
    task's id and the batch as received (worker.celery.worker.signing), whether this was a redelivery and, when
    this worker had to fetch the run's image first, how. `image_wait_s` > 0: the coordinator was
    still publishing the image when it sent the batch."""
    specs = decode_batch(batch)
    fetched = None
    refusal = version_refusal(batch)
    if refusal is not None:
        observed = [
            Observation.harness_fault(s, refusal, origin=FaultOrigin.HARNESS, worker_id=worker_id()) for s in specs
        ]
        return _result(self, batch, observed, fetched)
    try:
        # One image per batch: the wire refuses batches whose specs differ in more than index and canary.
        fetched = fetch_image(specs[0], bounded_wait(image_wait_s))
    except GateError as exc:
        # Unfetchable or failing verification: refused here, never run in whatever image is at hand.
        detail = f"run image unavailable: {exc}"
        observed = [
            Observation.harness_fault(s, detail, origin=FaultOrigin.HARNESS, worker_id=worker_id()) for s in specs
        ]
    else:
        run_ids = {spec.run_id for spec in specs}
        with open_runs(sandbox).serving(run_ids):
            try:
                with stoppable():
                    observed = sandbox().run_batch(specs, inputs())
            except SoftTimeLimitExceeded:
                # The coordinator stopped the run (CeleryExecutor.abort revokes with STOP_SIGNAL): remove
                # its containers now, and start none of its trials in this process again.
                for run_id in run_ids:
                    sandbox().abort(run_id)
                raise
            except WorkerStopping:
                # This worker is shutting down (its sandbox has removed the batch's containers): the
                # batch goes back to the queue whole, for another worker.
                raise Reject("worker shutting down", requeue=True) from None
    return _result(self, batch, observed, fetched)


def _result(self: Any, batch: dict[str, Any], observed: list[Observation], fetched: Fetched | None) -> dict[str, Any]:
    delivery = self.request.delivery_info or {}
    observations = encode_observations(observed)
    return {
        "observations": observations,
        # Binds these exact bytes to the batch id and spec this worker was handed (gate.core.trust.enrolment).
        "signature": sign_result(self.request.id, batch, observations),
        "worker": worker_id(),
        "version": __version__,  # the coordinator refuses another version's results (worker.celery.coordinator.answers)
        "redelivered": bool(delivery.get("redelivered")),
        "fetched": None if fetched is None else {"via": fetched.via, "seconds": round(fetched.seconds, 3)},
    }


@shared_task(name=TASK_RESEAL)
def reseal(fixture_dir: str, seal_file: str) -> dict[str, Any]:
    """Nightly re-seal check (never writes): the exit code and the JSON line `gate reseal` printed."""
    from gate.core.errors import GateError
    from gate.io.reseal import run_reseal

    out = io.StringIO()
    try:
        code = run_reseal(Path(fixture_dir), Path(seal_file), write=False, out=out)
    except GateError as exc:
        return {"exit_code": exc.exit_code, "output": str(exc)}
    return {"exit_code": code, "output": out.getvalue()}
