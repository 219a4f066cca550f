"""The Sandbox protocol, what runs trials and reports what it saw, and `Inputs`, where it gets a
trial's bytes. The sandboxes themselves are worker.host.sandboxes' (Docker, and the stub double)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from gate.core.suite.trial import Limits, Observation, TrialSpec


class Inputs(Protocol):
    """Where a sandbox gets a trial's bytes: a patched tree and fixture blobs, by digest."""

    def tree_dir(self, digest: str) -> Path:
        """A local directory holding the tree whose seal is `digest` (read-only use)."""
        ...

    def fixture_bytes(self, digest: str) -> bytes:
        """The fixture file whose sha256 is `digest`, verified."""
        ...


class Sandbox(Protocol):
    """Runs trials and reports what it saw; never judges. The one I/O method is `run_batch`."""

    def image_id(self) -> str:
        """The ID of the image trials run in; raises SandboxError when it is not available."""
        ...

    def run_batch(self, specs: list[TrialSpec], inputs: Inputs) -> list[Observation]:
        """One observation per spec, in order; a per-trial fault is an Observation, not a raise."""
        ...

    def open(self, run_id: str) -> None:
        """A run begins: the sandbox may keep what its batches share (warm containers) until `close`."""
        ...

    def prestart(self, run_id: str, limits: Limits, count: int) -> None:
        """For an open run, start up to `count` containers of `limits` in the background, before any
        trial needs them; `close` removes those no batch used."""
        ...

    def close(self, run_id: str) -> int:
        """A run ended (however): release everything kept for it; returns how many containers went."""
        ...

    def abort(self, run_id: str) -> int:
        """Stop a run now (e.g. on Ctrl-C): start none of its trials, remove its containers."""
        ...
