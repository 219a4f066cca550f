"""The Executor protocol, the one seam between where trials run and what they mean, and the two
helpers every run uses on it: `opened` (a run's bracket) and `serves_every_tree`.

`Executor.run(specs, inputs)` yields one Observation per spec, in completion order; `open` and
`close` bracket a whole run, so its sandboxes stay warm from wave to wave.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Protocol

from gate.core.card.card import HarnessEvent
from gate.core.suite.trial import Limits, Observation, TrialSpec
from gate.io.snapshot import LocalInputs


class Executor(Protocol):
    image: str  # the sandbox image tag trials are routed to
    events: list[HarnessEvent]  # redeliveries, lost batches, broker outages seen during `run`

    def image_id(self) -> str:
        """The image ID when known before any trial runs (local engine); "" when only workers know."""
        ...

    def open(self, run_id: str, limits: Limits) -> None:
        """A run begins: its sandboxes stay warm across `run` calls (waves) until `close`, and may
        start containers of `limits` while the coordinator is still sealing and planning."""
        ...

    def run(self, specs: Sequence[TrialSpec], inputs: LocalInputs) -> Iterator[Observation]:
        """Run every spec; yield each observation as it arrives (order is not guaranteed)."""
        ...

    def close(self, run_id: str) -> None:
        """The run is over: nothing kept for it may remain anywhere."""
        ...

    def abort(self, run_id: str) -> None:
        """Stop the run now (Ctrl-C, or the run failed): start none of its trials, remove what it
        started, and wait for nothing that could take longer than a few seconds."""
        ...


@contextlib.contextmanager
def opened(executor: Executor, run_id: str, limits: Limits) -> Iterator[Executor]:
    """The executor open for one run: closed when the block ends, aborted when it raises (Ctrl-C
    included), so a run that stops early leaves nothing running and waits out no deadline."""
    try:
        executor.open(run_id, limits)
        yield executor
    except BaseException:
        executor.abort(run_id)
        raise
    executor.close(run_id)


def serves_every_tree(executor: object) -> bool:
    """Whether `executor` lays out every tree its inputs serve (`LocalInputs.trees`: a paired property's
    base tree beside the patched one), as it says with `serves_every_tree = True`; else patch trees only."""
    return getattr(executor, "serves_every_tree", False) is True
