"""How a batch's message is settled with the broker on a worker confined to its own direct queue.

Such a worker takes its batches without acknowledgements (worker.celery.shared.app): only the coordinator puts
batches there, never more than the worker has room for, and it, not the broker, sends a batch elsewhere when the
worker is gone (worker.celery.coordinator.liveness). So there is nothing to acknowledge, and no broker round trip
between one batch and the next. A batch to be run again (its pool process died under it, or the worker is
shutting down) is put back on the worker's own queue under the same id, as a requeue would: whoever consumes the
queue next runs it, and an answer for a batch already moved elsewhere counts nowhere.
"""

from __future__ import annotations

import contextlib
import logging

from celery.worker.request import Request

_log = logging.getLogger(__name__)


class BatchRequest(Request):
    """Celery's request, settling batches taken without acknowledgements on the worker's side alone."""

    def _unacked(self) -> bool:
        """Whether this batch came from a queue consumed without acknowledgements."""
        queue = self.app.amqp.queues.get((self.delivery_info or {}).get("routing_key") or "")
        return bool(queue is not None and queue.no_ack)

    def acknowledge(self) -> None:
        if self._unacked():
            self.acknowledged = True  # taken without an acknowledgement: nothing to tell the broker
            return
        super().acknowledge()

    def reject(self, requeue: bool = False) -> None:
        if not self._unacked():
            super().reject(requeue)
            return
        if self.acknowledged:
            return
        self.acknowledged = True
        if requeue:
            queue = self.delivery_info["routing_key"]
            # An unreachable broker loses the batch here: the coordinator sends it elsewhere once this worker is
            # presumed gone, or ends it as harness faults after its result timeout.
            with contextlib.suppress(Exception):
                self.task.apply_async(args=self.args, kwargs=self.kwargs, task_id=self.id, queue=queue)
                return
            _log.warning("probegate: batch %s could not be put back on %s", self.id, queue)
