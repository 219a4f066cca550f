"""A stand-in worker for the enrolment tests: a Celery worker registered under the batch task's name
(`probegate.run_batch`) that runs nothing and fabricates clean, passing observations (exit 0, no
writes, no canary). $STANDIN_MODE says how it dresses them up:

    unsigned     no signature at all
    sign         signed honestly with $STANDIN_KEY (an unknown, a revoked or an enrolled key)
    other_batch  signed with $STANDIN_KEY for a batch id the coordinator never issued
    other_spec   signed with $STANDIN_KEY over the digest of a different batch spec (the batch as tampered)
    claim        signed with $STANDIN_KEY but claiming key id $STANDIN_CLAIM (an enrolled worker's)
    replay       returns, unchanged, a signed result some honest worker left in the result store

Started as `python -m celery -A standin_worker worker -Q probegate.trials` with $PROBEGATE_BROKER set.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import redis

from gate import __version__
from gate.core.suite.trial import Observation
from gate.core.trust.enrolment import ResultSignature, result_message, spec_digest
from gate.io.keys import load_signing_key
from worker.celery.shared.app import TASK_RUN_BATCH, make_app
from worker.celery.shared.wire import decode_batch, encode_observations

app = make_app(os.environ["PROBEGATE_BROKER"], visibility_timeout_s=30)
app.conf.include = []  # the honest run_batch must not be registered here: it would answer under the same name


def _signature(batch_id: str, spec: str, observations: str, claim: str | None = None) -> dict[str, str]:
    key = load_signing_key(Path(os.environ["STANDIN_KEY"]))
    signature = key.sign(result_message(batch_id, spec, observations)).hex()
    return ResultSignature(
        key_id=claim or key.key_id, batch_id=batch_id, spec_digest=spec, signature=signature
    ).model_dump()


def _stolen(own_id: str) -> dict[str, Any]:
    client = redis.Redis.from_url(os.environ["PROBEGATE_BROKER"])
    for key in client.scan_iter("*celery-task-meta-*"):  # the plain key, or under a direct queue
        meta = json.loads(client.get(key) or b"{}")
        result = meta.get("result")
        if meta.get("task_id") != own_id and isinstance(result, dict) and result.get("signature"):
            return result
    raise RuntimeError("no signed result to replay")


@app.task(name=TASK_RUN_BATCH, bind=True)
def run_batch(self: Any, batch: dict[str, Any], image_wait_s: float = 0.0) -> dict[str, Any]:
    """Fabricate a clean pass for every trial of the batch; sign (or not) as $STANDIN_MODE says."""
    mode = os.environ.get("STANDIN_MODE", "unsigned")
    if mode == "replay":
        return _stolen(self.request.id)
    specs = decode_batch(batch)
    fake = [Observation.of(s, exit_code=0, image_id=s.image_id or "null", worker_id="honest-box") for s in specs]
    observations = encode_observations(fake)
    result: dict[str, Any] = {
        "observations": observations, "worker": "honest-box", "version": __version__, "redelivered": False
    }  # fmt: skip
    batch_id, spec = self.request.id, spec_digest(batch)
    if mode == "other_batch":
        batch_id = "never-issued-" + batch_id
    elif mode == "other_spec":
        spec = spec_digest({**batch, "indices": [*reversed(batch["indices"]), 999]})
    if mode != "unsigned":
        result["signature"] = _signature(batch_id, spec, observations, os.environ.get("STANDIN_CLAIM"))
    return result
