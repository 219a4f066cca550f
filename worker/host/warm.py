"""Warm containers: a started sandbox container that serves one batch after another for one run,
and the idle ones kept between batches (`IdleContainers`), keyed by everything a container is fixed
to: a spare by its `SpareShape`, a container bound to a batch's tree and clock by its `BoundShape`.

A container is only kept for a run that was opened (`IdleContainers.open`) and until it is closed;
one that failed, timed out or was killed is never checked back in. The supervisor inside exits
after IDLE_S without a batch, so a vanished host leaves nothing running for long; the host stops
handing out a container well before that (HOST_IDLE_S).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from gate.core.errors import SandboxError
from gate.core.suite.trial import SANDBOX_UID, ClockSpec, Limits, TrialSpec, WorkCopy
from worker.host.container import ReportStream
from worker.host.engine import Container
from worker.host.treemount import release, show

HOST_IDLE_S = 40.0  # the host hands out no container idle longer than this (a margin below IDLE_S)

# A spare's faketimerc until a batch binds its clock. The same length and format as every real one
# (clock_line), so rewriting it in place never shows a reader an empty or unparsable file: libfaketime
# re-reads it in running processes too, and exits on a bad one (seen: the supervisor).
UNBOUND_CLOCK = " 2000-01-01 00:00:00"


def clock_line(clock: ClockSpec, ticks: bool) -> bytes:
    """The faketimerc contents for `clock`: "@" before the instant starts a clock that ticks from it
    (libfaketime's start-at mode), a space keeps it frozen. Both modes have the same length and put the
    instant at the same offset, so a rewrite in place between them changes one byte and the date (glibc's
    strptime skips the leading space; a leading newline would not do: libfaketime reads "" then and exits)."""
    return (("@" if ticks else " ") + clock.faketimerc() + "\n").encode()


@dataclass(frozen=True)
class BoundShape:
    """Everything a bound container is fixed to: batches of another run, tree, clock, limits or image
    cannot share it."""

    run_id: str
    tree_digest: str
    clock: ClockSpec
    limits: Limits
    image_id: str

    @classmethod
    def of(cls, spec: TrialSpec, image_id: str) -> BoundShape:
        return cls(spec.run_id, spec.tree_digest, spec.clock, spec.limits, image_id)

    def spare(self, image: str) -> SpareShape:
        """The shape of a spare that can become this container (it gets tree and clock at bind time)."""
        return SpareShape(self.run_id, self.limits, image)


@dataclass(frozen=True)
class SpareShape:
    """What a spare container is fixed to at creation: its run, limits and image tag."""

    run_id: str
    limits: Limits
    image: str


class Warm:
    """One container, its report stream and its host-side dirs (mounted read-only inside): `in_dir`
    for batch files, fixtures and faketimerc, `src_dir` for the tree (filled by `bind`)."""

    def __init__(self, run_id: str, tmp: tempfile.TemporaryDirectory, in_dir: Path, src_dir: Path) -> None:
        self.shape: BoundShape | None = None  # set by `bind`: until then the container serves no batch
        self.clock_ticks = False  # the mode its faketimerc says (`send` switches it per batch)
        self._run_id = run_id
        self.tmp = tmp
        self.in_dir = in_dir
        self.src_dir = src_dir
        self.image_id = ""
        self.container: Container | None = None
        self.stream: ReportStream | None = None
        self.started = False
        self.seq = 0  # the next batch file's number
        self.idle_since = time.monotonic()
        self._fixtures: set[str] = set()
        # The mode asked of its supervisor at creation, and why copy when the host asked for it.
        self.work_copy = WorkCopy.COPY
        self.work_copy_note = ""
        # Taken from the standing pool (worker/host/pool.py): the pool removes it and its dirs when the
        # run's lease closes; `remove` only makes sure nothing runs in it any more.
        self.pooled = False
        # Its /src dir is a shared mount the tree is mounted on, not linked into (worker/host/treemount.py).
        self.tree_mount = False
        # The tree was mounted and is the sandbox uid's: overlay mode may use it in place as its lower.
        self.tree_in_place = False

    @property
    def run_id(self) -> str:
        return self._run_id

    def bind(self, shape: BoundShape, tree: Path) -> None:
        """Fix this container to a tree and a clock before its first batch (it may already be running:
        /src and /etc/faketimerc are bind mounts whose contents the supervisor reads per batch)."""
        if self.tree_mount:
            try:
                show(tree, self.src_dir, self.src_dir.parent / "stage")
            except SandboxError:
                self.tree_mount = False  # nothing was left mounted: link it in instead
        if not self.tree_mount:
            fill_tree(tree, self.src_dir)
        # Every entry is the sandbox uid's or none is: a snapshot's owner is set whole (world_readable).
        st = os.lstat(tree)
        self.tree_in_place = self.tree_mount and (st.st_uid, st.st_gid) == (SANDBOX_UID, SANDBOX_UID)
        write_in_place(self.in_dir / "faketimerc", clock_line(shape.clock, self.clock_ticks))
        self.shape = shape

    def send(self, batch: dict, fixtures: dict[str, bytes]) -> int:
        """Write this batch's fixture files (once each), its clock mode, and then its batch file; returns
        its number."""
        ticks = bool(batch.get("clock_ticks"))
        if ticks != self.clock_ticks and self.shape is not None:
            # Between batches nothing of a trial runs: a probe reads the file as it starts, and the warm
            # parent is replaced when the batch's clock mode differs (worker/box/warmclient.py).
            write_in_place(self.in_dir / "faketimerc", clock_line(self.shape.clock, ticks))
            self.clock_ticks = ticks
        for digest, data in fixtures.items():
            if digest not in self._fixtures:
                self._write(f"stdin-{digest}", data)
                self._fixtures.add(digest)
        seq = self.seq
        batch = {**batch, "tree_in_place": self.tree_in_place}
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
        if self.pooled:
            ended = self.stream is None or self.stream.ended
            if self.stream is not None:
                self.stream.close()
            if not ended and self.container is not None:
                with contextlib.suppress(SandboxError):
                    self.container.kill()
            release(self.src_dir, keep_shared=True)  # our tree; the shared mount is the pool's
            return
        if self.stream is not None:
            self.stream.close()
        if self.container is not None:
            with contextlib.suppress(SandboxError):
                self.container.remove()
        release(self.src_dir)  # never rmtree through a mounted tree
        self.tmp.cleanup()


def write_in_place(path: Path, data: bytes) -> None:
    """Overwrite a file of the same length with one pwrite, keeping its inode (a bind mount of a
    single file pins the inode, not the name) and never truncating it under a reader."""
    fd = os.open(path, os.O_WRONLY)
    try:
        if os.fstat(fd).st_size != len(data) or os.pwrite(fd, data, 0) != len(data):
            raise OSError(f"{path}: cannot overwrite {os.fstat(fd).st_size} bytes with {len(data)} in place")
    finally:
        os.close(fd)


def fill_tree(tree: Path, dst: Path) -> None:
    """Lay the tree out in `dst` by hard links (the tree is a private snapshot nobody writes), or copies
    across file systems. Either way the container sees it read-only."""

    def link(src: str, target: str) -> None:
        try:
            os.link(src, target)
        except OSError:
            shutil.copy2(src, target)

    shutil.copytree(tree, dst, symlinks=True, copy_function=link, dirs_exist_ok=True)


class IdleContainers:
    """Idle warm containers of the open runs, bound ones and spares, between batches (thread-safe)."""

    def __init__(self, max_idle: int) -> None:
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self._idle: dict[BoundShape, list[Warm]] = {}
        self._spares: dict[SpareShape, list[Future[Warm]]] = {}
        self._images: dict[str, str] = {}  # open run → the image ID its batches resolved first

    def open(self, run_id: str) -> None:
        with self._lock:
            self._open.add(run_id)

    def is_open(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._open

    def checkout(self, shape: BoundShape) -> Warm | None:
        """An idle container of this shape, or None; stale ones found on the way are removed."""
        stale, found = [], None
        with self._lock:
            idle = self._idle.get(shape, [])
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
        is closed or enough usable containers already wait. Unusable ones found waiting are removed
        first: a gate-worker's runs stay open after their containers were removed by the close-run
        command, and their dead containers must not take the places of the next run's."""
        stale: list[Warm] = []
        with self._lock:
            if warm.run_id not in self._open:
                return False
            if sum(map(len, self._idle.values())) >= self.max_idle:
                for idle in self._idle.values():
                    stale += [w for w in idle if not w.usable()]
                    idle[:] = [w for w in idle if w.usable()]
            kept = sum(map(len, self._idle.values())) < self.max_idle
            if kept:
                warm.idle_since = time.monotonic()
                self._idle.setdefault(warm.shape, []).append(warm)
        for dead in stale:
            dead.remove()
        return kept

    def image_of(self, run_id: str) -> str | None:
        with self._lock:
            return self._images.get(run_id)

    def remember_image(self, run_id: str, image_id: str) -> None:
        """Keep the run's image ID until it closes (nothing is kept for a run that is not open)."""
        with self._lock:
            if run_id in self._open:
                self._images.setdefault(run_id, image_id)

    def add_spare(self, shape: SpareShape, starting: Future[Warm]) -> bool:
        """Hold a container being started for an open run; False when the run is not open."""
        with self._lock:
            if shape.run_id not in self._open:
                return False
            self._spares.setdefault(shape, []).append(starting)
            return True

    def take_spare(self, shape: SpareShape) -> Future[Warm] | None:
        """A spare of this shape (perhaps still starting), or None."""
        with self._lock:
            spares = self._spares.get(shape, [])
            return spares.pop() if spares else None

    def close(self, run_id: str) -> tuple[list[Warm], list[Future[Warm]]]:
        """Close the run: nothing more is checked in for it; returns its idle containers and its
        unused spares (perhaps still starting), all to remove."""
        with self._lock:
            self._open.discard(run_id)
            self._images.pop(run_id, None)
            shapes = [shape for shape in self._idle if shape.run_id == run_id]
            spare_shapes = [shape for shape in self._spares if shape.run_id == run_id]
            idle = [warm for shape in shapes for warm in self._idle.pop(shape)]
            return idle, [f for shape in spare_shapes for f in self._spares.pop(shape)]
