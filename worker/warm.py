"""Warm containers: a started sandbox container that serves one batch after another for one run,
and the pool that keeps them between batches, keyed by everything a container is fixed to.

A container is only pooled for a run that was opened (`WarmPool.open`) and until it is closed;
one that failed, timed out or was killed is never checked back in. The supervisor inside exits
after IDLE_S without a batch, so a vanished host leaves nothing running for long; the host stops
handing out a container well before that (HOST_IDLE_S).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from gate.trial import ClockSpec, Limits
from worker.container import ReportStream
from worker.image import DOCKER_ERRORS

HOST_IDLE_S = 40.0  # the host hands out no container idle longer than this (a margin below IDLE_S)

Key = tuple[str, str, ClockSpec, Limits, str]  # run id, tree digest, clock, limits, image id


class Warm:
    """One container, its report stream and its host-side input dir (mounted read-only inside)."""

    def __init__(self, key: Key, tmp: tempfile.TemporaryDirectory, in_dir: Path) -> None:
        self.key = key
        self.tmp = tmp
        self.in_dir = in_dir
        self.container: Any = None
        self.stream: ReportStream | None = None
        self.started = False
        self.seq = 0  # the next batch file's number
        self.idle_since = time.monotonic()
        self._fixtures: set[str] = set()

    @property
    def run_id(self) -> str:
        return self.key[0]

    def send(self, batch: dict, fixtures: dict[str, bytes]) -> int:
        """Write this batch's fixture files (once each) and then its batch file; returns its number."""
        for digest, data in fixtures.items():
            if digest not in self._fixtures:
                self._write(f"stdin-{digest}", data)
                self._fixtures.add(digest)
        seq = self.seq
        # Renamed into place, so the supervisor never reads a half-written batch.
        self._write(f"batch-{seq}.json", json.dumps(batch).encode())
        (self.in_dir / f"batch-{seq - 1}.json").unlink(missing_ok=True)
        self.seq += 1
        return seq

    def _write(self, name: str, data: bytes) -> None:
        part = self.in_dir / f".{name}.part"
        part.write_bytes(data)
        part.chmod(0o444)
        os.replace(part, self.in_dir / name)

    def usable(self) -> bool:
        alive = self.stream is not None and not self.stream.ended
        return alive and time.monotonic() - self.idle_since < HOST_IDLE_S

    def stop(self) -> None:
        """Ask the supervisor to exit by itself (cheaper to remove than a running container)."""
        with contextlib.suppress(OSError):
            self._write("stop", b"")

    def remove(self) -> None:
        if self.stream is not None:
            self.stream.close()
        if self.container is not None:
            with contextlib.suppress(*DOCKER_ERRORS):
                self.container.remove(force=True)
        self.tmp.cleanup()


class WarmPool:
    """Idle warm containers of the open runs (thread-safe)."""

    def __init__(self, max_idle: int) -> None:
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self._idle: dict[Key, list[Warm]] = {}

    def open(self, run_id: str) -> None:
        with self._lock:
            self._open.add(run_id)

    def is_open(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._open

    def checkout(self, key: Key) -> Warm | None:
        """An idle container of this shape, or None; stale ones found on the way are removed."""
        stale, found = [], None
        with self._lock:
            idle = self._idle.get(key, [])
            while idle and found is None:
                warm = idle.pop()
                if warm.usable():
                    found = warm
                else:
                    stale.append(warm)
        for warm in stale:
            warm.remove()
        return found

    def checkin(self, warm: Warm) -> bool:
        """Keep `warm` for the next batch of its run; False (the caller removes it) when the run
        is closed or enough containers already wait."""
        with self._lock:
            if warm.run_id not in self._open or sum(map(len, self._idle.values())) >= self.max_idle:
                return False
            warm.idle_since = time.monotonic()
            self._idle.setdefault(warm.key, []).append(warm)
            return True

    def close(self, run_id: str) -> list[Warm]:
        """Close the run: nothing more is checked in for it; returns its idle containers to remove."""
        with self._lock:
            self._open.discard(run_id)
            keys = [key for key in self._idle if key[0] == run_id]
            return [warm for key in keys for warm in self._idle.pop(key)]
