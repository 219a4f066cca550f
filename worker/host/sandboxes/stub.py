"""StubSandbox: a test and benchmark double of the Sandbox protocol that runs nothing and answers every
trial at once, from a script function (by default a clean, empty exit); never for gating."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

from gate.core.suite.sandbox import Inputs
from gate.core.suite.trial import Limits, Observation, TrialSpec

STUB_IMAGE = "stub"

# One trial's answer from its spec and fixture bytes, like httpx's MockTransport handler.
Script = Callable[[TrialSpec, bytes], Observation]


class StubSandbox:
    """Answers each trial with `script(spec, fixture_bytes)`, or without a script with a clean exit and no
    output; starts, keeps and removes nothing. An answer that names no image, seed or worker ran in the
    stub's image (`image`: not the run's, so a stub worker's trials never count as the run's), with the
    spec's seed, on `worker_id`. The double behind `gate-worker serve --sandbox stub` (dispatch benchmarks,
    Celery tests) and the gate's own tests of what sits above a sandbox."""

    def __init__(self, script: Script | None = None, *, image: str = STUB_IMAGE, worker_id: str | None = None) -> None:
        self.script = script
        self.image = image
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"

    def image_id(self) -> str:
        return self.image

    def run_batch(self, specs: list[TrialSpec], inputs: Inputs) -> list[Observation]:
        return [self._answer(spec, inputs) for spec in specs]

    def _answer(self, spec: TrialSpec, inputs: Inputs) -> Observation:
        if self.script is None:  # reads no input: a benchmark may hand it none
            obs = Observation.of(spec, exit_code=0)
        else:
            obs = self.script(spec, inputs.fixture_bytes(spec.fixture_digest))
        if obs.fault:
            return obs
        named = {
            "image_id": obs.image_id or self.image,
            "seed": spec.seed if obs.seed is None else obs.seed,
            "worker_id": obs.worker_id or self.worker_id,
        }
        return obs.model_copy(update=named)

    def open(self, run_id: str) -> None:
        return None

    def prestart(self, run_id: str, limits: Limits, count: int) -> None:
        return None

    def close(self, run_id: str) -> int:
        return 0

    def abort(self, run_id: str) -> int:
        return 0
