"""The worker's tasks. `probegate.run_batch` runs trial specs through this machine's sandbox and
returns observations; it runs no suite or check code and judges nothing. Inputs are fetched by
digest from the blob store and verified before any trial sees them. Each batch's run stays open in
this process's sandbox (warm containers) until it has been idle a while (see worker.runs).
"""

from __future__ import annotations

import io
import os
import socket
from pathlib import Path
from typing import Any

from celery import shared_task

from gate.core.testing import MockSandbox
from gate.core.trial import Observation, Sandbox, TrialSpec
from worker.celery.app import TASK_RESEAL, TASK_RUN_BATCH
from worker.celery.blobs import BlobInputs, RedisBlobStore
from worker.celery.runs import open_runs  # also registers the close-run control command in the worker
from worker.celery.wire import decode_batch, encode_observations

_sandbox: Sandbox | None = None
_inputs: BlobInputs | None = None


def worker_id() -> str:
    return os.environ.get("PROBEGATE_WORKER_ID") or f"{socket.gethostname()}-{os.getpid()}"


def null_observation(spec: TrialSpec, fixture: bytes) -> Observation:
    """What `--sandbox null` reports: a clean exit with no output. For measuring dispatch only."""
    return Observation.of(spec, exit_code=0, image_id="null", worker_id=worker_id())


def sandbox() -> Sandbox:
    """This process's sandbox, made on first use (a Docker client must not cross a fork)."""
    global _sandbox
    if _sandbox is None:
        if os.environ.get("PROBEGATE_SANDBOX", "docker") == "null":
            _sandbox = MockSandbox(null_observation, image="null")
        else:
            from worker.host.sandbox import DockerSandbox

            image = os.environ.get("PROBEGATE_IMAGE")
            _sandbox = (
                DockerSandbox(image=image, worker_id=worker_id()) if image else DockerSandbox(worker_id=worker_id())
            )
    return _sandbox


def inputs() -> BlobInputs:
    global _inputs
    if _inputs is None:
        url = os.environ.get("PROBEGATE_BLOBS") or os.environ.get("PROBEGATE_BROKER", "redis://127.0.0.1:6379/0")
        cache = Path(os.environ.get("PROBEGATE_CACHE", Path.home() / ".cache" / "probegate"))
        _inputs = BlobInputs(RedisBlobStore(url), cache)
    return _inputs


@shared_task(name=TASK_RUN_BATCH, bind=True)
def run_batch(self: Any, batch: dict[str, Any]) -> dict[str, Any]:
    """Run a batch of trial specs; returns the observations and whether this was a redelivery."""
    specs = decode_batch(batch)
    with open_runs(sandbox).serving({spec.run_id for spec in specs}):
        observed = sandbox().run_batch(specs, inputs())
    delivery = self.request.delivery_info or {}
    return {
        "observations": encode_observations(observed),
        "worker": worker_id(),
        "redelivered": bool(delivery.get("redelivered")),
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
