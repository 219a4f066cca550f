"""NullSandbox: the Sandbox protocol with no container at all. Every trial "exits 0" with no output, in
an image called "null", so a broker round trip can be measured without Docker (`gate-worker serve
--sandbox null`, benchmarks/dispatch.py). It is a production seam used on purpose, beside DockerSandbox;
tests use gate.core.testing.MockSandbox instead."""

from __future__ import annotations

import os
import socket

from gate.core.suite.trial import Inputs, Limits, Observation, TrialSpec

NULL_IMAGE = "null"


class NullSandbox:
    """Reports a clean, empty exit for every trial; starts, keeps and removes nothing."""

    image = NULL_IMAGE

    def __init__(self, worker_id: str | None = None) -> None:
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"

    def image_id(self) -> str:
        return NULL_IMAGE

    def run_batch(self, specs: list[TrialSpec], inputs: Inputs) -> list[Observation]:
        return [Observation.of(spec, exit_code=0, image_id=NULL_IMAGE, worker_id=self.worker_id) for spec in specs]

    def open(self, run_id: str) -> None:
        return None

    def prestart(self, run_id: str, limits: Limits, count: int) -> None:
        return None

    def close(self, run_id: str) -> int:
        return 0

    def abort(self, run_id: str) -> int:
        return 0
