"""Executor doubles for tests and benchmarks, like httpx's MockTransport: `MockExecutor` answers every
trial from a function on the caller's thread, `MockFleet` does so as named workers. Nothing is started."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from gate.core.card.card import HarnessEvent
from gate.core.suite.sandbox import Inputs
from gate.core.suite.trial import Limits, Observation, TrialSpec

Handler = Callable[[TrialSpec, bytes], Observation]


def in_spec_image(spec: TrialSpec, obs: Observation) -> Observation:
    """A handler's observation that names no image or seed ran in the image and with the seed its spec
    names (as a real sandbox's does); one that names another keeps it (a worker that ran elsewhere)."""
    if obs.fault:
        return obs
    named = {"image_id": obs.image_id or spec.image_id, "seed": spec.seed if obs.seed is None else obs.seed}
    return obs.model_copy(update=named)


class MockExecutor:
    """An Executor that answers every spec in order with `handler(spec, fixture_bytes)` on the caller's
    thread and records the run's lifecycle (`calls`), so a whole gate run can be tested without Docker."""

    serves_every_tree = True  # answers any tree's specs alike

    def __init__(self, handler: Handler, image: str = "mock-image", image_id: str = "sha256:mock") -> None:
        self.handler = handler
        self.image = image
        self._image_id = image_id
        self.events: list[HarnessEvent] = []
        self.calls: list[tuple[str, ...]] = []

    def image_id(self) -> str:
        return self._image_id

    def open(self, run_id: str, limits: Limits) -> None:
        self.calls.append(("open", run_id))

    def run(self, specs: Sequence[TrialSpec], inputs: Inputs) -> Iterator[Observation]:
        self.calls.append(("run", str(len(specs))))
        for spec in specs:
            yield in_spec_image(spec, self.handler(spec, inputs.fixture_bytes(spec.fixture_digest)))

    def close(self, run_id: str) -> None:
        self.calls.append(("close", run_id))

    def abort(self, run_id: str) -> None:
        self.calls.append(("abort", run_id))


FleetHandler = Callable[[TrialSpec, bytes, str], Observation]


class MockFleet:
    """An executor of named workers: `run` deals specs round-robin over `workers` (both sides of a pair to one,
    as the Celery executor's assigner does), `run_elsewhere` sends them all to the first worker outside the
    avoid set; `handler(spec, fixture, worker)` answers each (its observation gets `worker_id=worker` unless
    the handler names another: a lying worker may)."""

    serves_every_tree = True  # answers any tree's specs alike

    def __init__(self, handler: FleetHandler, workers: Sequence[str], image_id: str = "sha256:mock") -> None:
        self.handler = handler
        self.workers = tuple(workers)
        self.image = "mock-image"
        self._image_id = image_id
        self.events: list[HarnessEvent] = []
        self.calls: list[tuple[str, int, tuple[str, ...]]] = []  # ("run" | worker, specs, avoided)

    def image_id(self) -> str:
        return self._image_id

    def open(self, run_id: str, limits: Limits) -> None:
        return None

    def close(self, run_id: str) -> None:
        return None

    def abort(self, run_id: str) -> None:
        return None

    def _answer(self, spec: TrialSpec, inputs: Inputs, worker: str) -> Observation:
        obs = in_spec_image(spec, self.handler(spec, inputs.fixture_bytes(spec.fixture_digest), worker))
        return obs if obs.worker_id else obs.model_copy(update={"worker_id": worker})

    def run(self, specs: Sequence[TrialSpec], inputs: Inputs) -> Iterator[Observation]:
        self.calls.append(("run", len(specs), ()))
        turns: dict[tuple[str, int], int] = {}  # a paired property's base and patch trial of an index: one turn
        for spec in specs:
            turn = turns.setdefault((spec.property_id, spec.trial_index), len(turns))
            yield self._answer(spec, inputs, self.workers[turn % len(self.workers)])

    def run_elsewhere(
        self, specs: Sequence[TrialSpec], inputs: Inputs, avoid_workers: frozenset[str]
    ) -> Iterator[Observation]:
        others = [w for w in self.workers if w not in avoid_workers]
        if not others:
            self.events.append(
                HarnessEvent(kind="no_cross_check_worker", detail=f"{len(specs)} trial(s): every worker is avoided")
            )
            return
        self.calls.append((others[0], len(specs), tuple(sorted(avoid_workers))))
        for spec in specs:
            yield self._answer(spec, inputs, others[0])
