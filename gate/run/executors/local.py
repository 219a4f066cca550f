"""The local pool: the default executor (no broker), running batches on threads of this machine,
each thread calling one `Sandbox` (gate.core.suite.sandbox)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed

from gate.core.card.card import HarnessEvent
from gate.core.suite.batching import batches
from gate.core.suite.sandbox import Inputs, Sandbox
from gate.core.suite.trial import FaultOrigin, Limits, Observation, TrialSpec

MAX_LOCAL_BATCH = 50  # a crashed supervisor costs at most this many trials' container


class LocalExecutor:
    """Runs batches on a thread pool sized to the machine; each thread drives one sandbox call."""

    serves_every_tree = True  # each batch's tree comes from `inputs.tree_dir(spec.tree_digest)`

    def __init__(self, sandbox: Sandbox, *, jobs: int | None = None, batch_size: int | None = None) -> None:
        self.sandbox = sandbox
        self.jobs = jobs or os.cpu_count() or 2
        self.batch_size = batch_size
        self.image: str = getattr(sandbox, "image", "")
        self.events: list[HarnessEvent] = []
        self._open: set[str] = set()
        self._pools: set[ThreadPoolExecutor] = set()  # those of `run` calls still in progress

    def image_id(self) -> str:
        return self.sandbox.image_id()

    def open(self, run_id: str, limits: Limits) -> None:
        self.sandbox.open(run_id)
        self.sandbox.prestart(run_id, limits, self.jobs)  # one container per job, started while the gate plans
        self._open.add(run_id)

    def close(self, run_id: str) -> None:
        self._open.discard(run_id)
        self.sandbox.close(run_id)

    def abort(self, run_id: str) -> None:
        self._open.discard(run_id)
        for pool in list(self._pools):
            pool.shutdown(wait=False, cancel_futures=True)  # queued batches never start
        self.sandbox.abort(run_id)  # running ones find their containers gone and return at once

    def run(self, specs: Sequence[TrialSpec], inputs: Inputs) -> Iterator[Observation]:
        run_ids = {spec.run_id for spec in specs}
        # A run not opened by the caller is scoped to this call: its containers go when it returns.
        scoped = run_ids - self._open
        for run_id in scoped:
            self.sandbox.open(run_id)
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="trial")
        self._pools.add(pool)
        try:
            futures: dict[Future[list[Observation]], list[TrialSpec]] = {
                pool.submit(self.sandbox.run_batch, batch, inputs): batch for batch in self._batches(specs)
            }
            for future in as_completed(futures):
                batch = futures[future]
                try:
                    observed = future.result()
                except Exception as exc:
                    # A sandbox that raises instead of reporting is itself a harness fault.
                    detail = f"sandbox raised {type(exc).__name__}: {exc}"
                    observed = [Observation.harness_fault(s, detail, origin=FaultOrigin.UNKNOWN) for s in batch]
                yield from observed
        except BaseException:
            # Ctrl-C or an abandoned generator: in-flight trials live in pool threads, so end
            # them by removing their containers instead of waiting out their deadlines.
            for run_id in run_ids:
                self.sandbox.abort(run_id)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self._pools.discard(pool)
            for run_id in scoped:
                self.sandbox.close(run_id)

    def _batches(self, specs: Sequence[TrialSpec]) -> list[list[TrialSpec]]:
        """Each property's trials split evenly over the pool: batches are as large as they can be
        while every job still gets one (a warm container spares all but a thread's first start)."""
        if self.batch_size:
            return batches(specs, self.batch_size)
        counts: dict[str, int] = {}
        for spec in specs:
            counts[spec.property_id] = counts.get(spec.property_id, 0) + 1
        size = max(1, min(MAX_LOCAL_BATCH, math.ceil(max(counts.values(), default=1) / self.jobs)))
        return batches(specs, size)
