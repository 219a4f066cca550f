"""The Celery app both sides share: JSON only, late acks, one message prefetched per process,
and a Redis visibility timeout that the coordinator's batch sizing respects.

Each side builds its own with `make_app(url)`: a worker from its `--broker` (or PROBEGATE_BROKER), the
coordinator from `gate run --broker`. Tasks live in `worker.celery.worker.tasks` and are addressed by name.
"""

from __future__ import annotations

import hashlib
import re

from celery import Celery
from kombu import Exchange, Queue

# Redis hands an unacknowledged message to another worker after this long. A batch must finish
# well inside it, so the coordinator caps a batch's summed deadlines at half of it (see dispatch).
# The default; the entry points take $PROBEGATE_VISIBILITY_TIMEOUT into their settings.
VISIBILITY_TIMEOUT_S = 600.0
TASK_RUN_BATCH = "probegate.run_batch"
TASK_RESEAL = "probegate.reseal"
# Remote-control command the coordinator broadcasts when a run ends (handled in worker.celery.worker.runs).
CONTROL_CLOSE_RUN = "probegate_close_run"
# What a revoke with terminate sends the pool process running a stopped run's batch: billiard turns
# SIGUSR1 into SoftTimeLimitExceeded there, which the task catches to remove its containers itself.
STOP_SIGNAL = "SIGUSR1"


# Every worker consumes this queue: a batch names its run's image by ID, and a worker that lacks
# that image fetches it by content (worker.celery.worker.imagefetch), so any worker can serve any run.
SHARED_QUEUE = "probegate.trials"


def queue_for(image: str) -> str:
    """The queue named after an image: a worker started for `image` consumes it besides its main
    queue (the shared one unless `--queue` pins it elsewhere), so a coordinator routing by image,
    as older ones did, still reaches that fleet."""
    return "probegate." + _queue_safe(image)


DIRECT_PREFIX = "probegate.direct."
DIRECT_PREFETCH = 4  # messages per process a worker consuming its direct queue alone holds ahead


def direct_queue(key_id: str) -> str:
    """The queue only the worker whose signing key is `key_id` consumes: cross-checks reach a chosen
    other worker through it. Named after the key, not a name the worker picks for itself, so the
    coordinator finds a result's queue from the key that signed it (with enrolment: verified)."""
    readable = _queue_safe(key_id)[:40]
    return f"{DIRECT_PREFIX}{readable}.{hashlib.sha256(key_id.encode()).hexdigest()[:12]}"


# Celery's Redis result backend, storing a direct queue's results under that queue (worker.celery.shared.results).
RESULTS_BACKEND = "worker.celery.shared.results:PlacedResults"


def unacked_keys(queue: str) -> dict[str, str]:
    """kombu's unacked bookkeeping of a worker that consumes `queue` alone, kept under that queue's name."""
    return {f"unacked{part}_key": f"{queue}.unacked{part}" for part in ("", "_index", "_mutex")}


def make_app(
    broker: str, backend: str | None = None, *, visibility_timeout_s: float | None = None, alone: str | None = None
) -> Celery:
    """A Celery app over `broker` (redis:// or rediss://) with the result backend on the same Redis.
    `alone`: the one queue this worker consumes, whose unacked messages it alone restores (its own keys)."""
    app = Celery(
        "probegate",
        broker=broker,
        backend=backend or f"{RESULTS_BACKEND}+{broker}",
        include=["worker.celery.worker.tasks"],
    )
    timeout = visibility_timeout_s or VISIBILITY_TIMEOUT_S
    transport: dict[str, object] = {
        "visibility_timeout": timeout,
        # Sweep for messages of dead workers often enough that a redelivery waits about `timeout`.
        "unacked_restore_interval": max(1, min(10, int(timeout / 4))),
        "unacked_restore_throttle": 1,
        "socket_timeout": 30,
        "socket_connect_timeout": 5,
        "health_check_interval": 10,
    }
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],  # never pickle: a broker on the internet must not run code
        result_accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={**transport, **(unacked_keys(alone) if alone else {})},
        result_backend_transport_options=transport,
        result_expires=6 * 3600,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_default_queue=SHARED_QUEUE,
        enable_utc=True,
    )
    if alone:
        # Only the coordinator puts batches on a direct queue, and no more than the worker has room for: the next
        # one waits in the worker already while one runs, so no round trip to the broker sits between them.
        app.conf.worker_prefetch_multiplier = DIRECT_PREFETCH
        app.conf.task_queues = (Queue(alone, Exchange(alone), routing_key=alone, no_ack=True),)
        # Its mailbox never expires: kombu then keeps no binding deadline for it and never sweeps expired
        # bindings, which are other clients' (a coordinator's reply queue) and not this user's to delete.
        app.conf.control_queue_expires = None
    return app


def _queue_safe(text: str) -> str:
    """`text` with every run of characters a queue name should not hold replaced by one dash."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
