"""The standing pool (`gate pool serve`): sandbox containers started ahead of any run, bound to no
tree, kept by one long-lived local process, so a fresh run pays no container start of its own.

Each container is made by runcontainers.create_warm exactly as a run makes its own (same mounts, seccomp,
user, read-only mounts; its /src an empty host dir of its own, filled by the run that takes it) and
started; its supervisor waits for a first batch. A run connects to the unix socket (same uid only)
and takes up to N containers of its shape (image ID, limits, work copy mode); the connection is the
lease (worker/host/poolclient.py): when it closes, however the run ended, the pool removes every
container handed over on it. A container serves at most one run. A take names its run, so a
process that ends the run elsewhere (a gate-worker's close-run command, in a process that holds no
lease) can have the pool remove the run's containers at once (`end_run`). The pool refills in the
background, for the shapes the last runs asked for (the shape given at start first).

Leak accounting: the containers carry the pool's pid and host (the dead-process sweep of `gate run`,
`gate-worker` and `gate sweep` removes a dead pool's) and probegate.run=pool-<pid> (`gate sweep --all`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import docker
from pydantic import ValidationError

from gate.core.errors import SandboxError
from gate.core.suite.trial import Limits, WorkCopy
from worker.host.container import batch_labels
from worker.host.engine import docker_client, has_image
from worker.host.poolwire import PoolShape, read_line, read_take, run_name, send_line
from worker.host.runcontainers import SUPERVISOR, create_warm
from worker.host.warm import Warm

LABEL_POOL = "probegate.pool"
IDLE_S = 1800.0  # a pooled supervisor waits this long for its first batch before it exits by itself
MAX_AGE_S = 1200.0  # the pool replaces a container older than this, well before its supervisor gives up
MAX_SHAPES = 4  # shapes kept filled: the ones the last runs asked for
REQUEST_TIMEOUT_S = 5.0
# While a run holds a lease the pool starts nothing (a container start costs the engine CPU, which the
# run's trials would pay for on a small machine), unless the lease is older than this.
REFILL_DEFER_S = 30.0
STOP_GRACE_S = 1.0  # how long a stopping pool lets runs give back what they hold before removing it
JOIN_S = 3.0  # the most a stop waits for the pool's own threads


@dataclass
class Ready:
    warm: Warm
    born: float = field(default_factory=time.monotonic)


class PoolServer:
    """Keeps `size` started containers per wanted shape and hands them out over `path`."""

    def __init__(
        self, path: Path, *, size: int = 2, client: docker.DockerClient | None = None, tree_mount: bool = True
    ) -> None:
        self.path = Path(path)
        self.size = size
        self._tree_mount = tree_mount  # False: PROBEGATE_TREE_MOUNT=off, trees are linked in
        self._client = client or docker_client()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._returned = threading.Event()  # a lease ended (a stop waits for those on event, not by polling)
        self._shapes: list[PoolShape] = []  # most recently asked last
        self._ready: dict[PoolShape, list[Ready]] = {}
        self._leased: dict[int, list[Warm]] = {}  # connection number → what it took
        self._lease_started: dict[int, float] = {}
        self._lease_run: dict[int, str] = {}  # connection number → the run it took for ("" unnamed)
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="probegate-pool-")
        self.label = f"pool-{os.getpid()}"
        self.started_total = 0  # containers started so far (for tests and the log)

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Listen on the socket (a stale one of a dead pool is replaced) and start refilling."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.path.parent.stat().st_uid != os.getuid():
            raise SandboxError(f"{self.path.parent} belongs to another user; choose another --socket")
        if self.path.exists():
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(self.path))
                raise SandboxError(f"a pool already listens on {self.path}")
            self.path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is ours alone from its first instant
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old)
        listener.listen(16)
        listener.settimeout(0.2)  # so the accept loop sees stop() (closing the socket wakes no accept)
        self._listener = listener
        for target, name in ((self._accept, "probegate-pool-accept"), (self._refill, "probegate-pool-refill")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def want(self, image_id: str, limits: Limits, work_copy: WorkCopy) -> None:
        """Keep containers of this shape ready (the most recently wanted shapes are kept)."""
        self._wanted(PoolShape(image_id, limits, work_copy))

    def wait_full(self, timeout_s: float) -> bool:
        """Wait until every wanted shape has `size` containers ready; whether it happened in time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if all(len(self._ready.get(s, [])) >= self.size for s in self._shapes):
                    return True
            time.sleep(0.05)
        return False

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop handing out, remove every ready container, wait up to `grace_s` for runs to give
        theirs back, then remove whatever is left: the pool leaves no container behind, and a stop
        takes seconds (SIGTERM to `gate pool serve`), whatever it was doing."""
        self._stopping.set()
        self._wake.set()
        if self._listener is not None:
            self._listener.close()
            with contextlib.suppress(OSError):
                self.path.unlink()
        for thread in self._threads:
            # A refill under way finishes its one container start (under a second), sees the stop and removes it.
            thread.join(timeout=JOIN_S)
        with self._lock:
            ready = [r.warm for slots in self._ready.values() for r in slots]
            self._ready.clear()
        _remove_all(ready)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._leased:
                    break
            self._returned.wait(0.05)
            self._returned.clear()
        with self._lock:
            leased = [w for warms in self._leased.values() for w in warms]
            self._leased.clear()
        _remove_all(leased)
        if any(thread.is_alive() for thread in self._threads):
            # A refill slower than JOIN_S (a loaded engine) may have finished its start since: remove what the
            # engine holds under this pool's label. One still starting is removed by its thread when it returns.
            self._remove_labelled()
        with contextlib.suppress(OSError):
            self._dir.cleanup()

    def _remove_labelled(self) -> None:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            found = self._client.containers.list(all=True, filters={"label": f"{LABEL_POOL}={self.path}"})
            for container in found:
                with contextlib.suppress(docker.errors.DockerException, OSError):
                    container.remove(force=True)

    # --- handing out -----------------------------------------------------------------------------

    def _accept(self) -> None:
        number = 0
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by stop()
            conn.settimeout(None)
            number += 1
            threading.Thread(target=self._serve, args=(conn, number), daemon=True, name="probegate-pool-lease").start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        """One lease: answer its one request, then wait for it to close and remove what it took."""
        with conn:
            try:
                uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
                if uid != os.getuid():
                    return  # another user's process gets nothing, not even an answer
                conn.settimeout(REQUEST_TIMEOUT_S)
                ask = read_line(conn)
                if "end_run" in ask:
                    ended = self.end_run(run_name(ask["end_run"]))
                    send_line(conn, {"ended": ended})
                    return
                shape, count, run = read_take(ask)
            except (OSError, ValueError, ValidationError, KeyError, TypeError) as exc:
                with contextlib.suppress(OSError):
                    send_line(conn, {"error": str(exc)[:200]})
                return
            given = self._hand_out(shape, count, number, run)
            try:
                slots = [{"container": w.container.id, "root": str(w.src_dir.parent)} for w in given]
                send_line(conn, {"slots": slots})
                conn.settimeout(None)
                while conn.recv(4096):  # nothing more is said: EOF is the run giving them back
                    pass
            except OSError:
                pass
            finally:
                with self._lock:
                    taken = self._leased.pop(number, [])
                    self._lease_started.pop(number, None)
                    self._lease_run.pop(number, None)
                _remove_all(taken)
                self._wake.set()
                self._returned.set()

    def end_run(self, run: str) -> int:
        """Remove every container handed out for `run` now, whether or not its leases have closed
        (they then give back nothing); how many. The run's leases no longer hold refilling back."""
        with self._lock:
            numbers = [n for n, r in self._lease_run.items() if r == run]
            taken = [w for n in numbers for w in self._leased.get(n, [])]
            for n in numbers:
                self._leased[n] = []
                self._lease_started.pop(n, None)
        _remove_all(taken)
        self._wake.set()
        return len(taken)

    def _hand_out(self, shape: PoolShape, count: int, number: int, run: str = "") -> list[Warm]:
        self._wanted(shape)
        given: list[Warm] = []
        with self._lock:
            ready = self._ready.get(shape, [])
            while ready and len(given) < count:
                slot = ready.pop(0)  # the oldest first: they are the nearest to their age limit
                if _usable(slot):
                    slot.warm.stream.close()  # the run attaches its own; ours would read its trials too
                    given.append(slot.warm)
                else:
                    threading.Thread(target=_remove_all, args=([slot.warm],), daemon=True).start()
            if self._stopping.is_set():
                ready.extend(Ready(w) for w in given)  # stop() removes them
                given = []
            self._leased[number] = given
            self._lease_started[number] = time.monotonic()
            if run:
                self._lease_run[number] = run
        self._wake.set()
        return given

    # --- refilling -------------------------------------------------------------------------------

    def _wanted(self, shape: PoolShape) -> None:
        with self._lock:
            if shape in self._shapes:
                self._shapes.remove(shape)
            self._shapes.append(shape)
            dropped = self._shapes[:-MAX_SHAPES]
            del self._shapes[:-MAX_SHAPES]
            gone = [r.warm for s in dropped for r in self._ready.pop(s, [])]
        _remove_all(gone)
        self._wake.set()

    def _refill(self) -> None:
        while not self._stopping.is_set():
            short = self._short()
            if short is None:
                self._wake.wait(timeout=1.0)
                self._wake.clear()
                continue
            try:
                warm = self._start(short)
            except (SandboxError, OSError):
                self._stopping.wait(2.0)  # the engine is away or the image gone: try again later
                continue
            with self._lock:
                keep = short in self._shapes and not self._stopping.is_set()
                if keep:
                    self._ready.setdefault(short, []).append(Ready(warm))
            if not keep:
                _remove_all([warm])

    def _short(self) -> PoolShape | None:
        """A shape with fewer than `size` usable containers ready (old or ended ones removed first);
        None while a run holds a young lease (see REFILL_DEFER_S)."""
        with self._lock:
            if any(time.monotonic() - t < REFILL_DEFER_S for t in self._lease_started.values()):
                return None
            stale = []
            for shape in reversed(self._shapes):  # the most recently asked first
                ready = self._ready.setdefault(shape, [])
                stale += [r.warm for r in ready if not _usable(r)]
                ready[:] = [r for r in ready if _usable(r)]
            found = next((s for s in reversed(self._shapes) if len(self._ready[s]) < self.size), None)
        _remove_all(stale)
        return found

    def _start(self, shape: PoolShape) -> Warm:
        if not has_image(self._client, shape.image_id):
            with self._lock:
                if shape in self._shapes:
                    self._shapes.remove(shape)  # nothing to start it from: forget the shape
            raise SandboxError(f"image {shape.image_id[:19]} is not on this engine")
        labels = batch_labels(self.label, "", 0, uuid.uuid4().hex, self.label) | {LABEL_POOL: str(self.path)}
        mode = (shape.work_copy, "")
        warm = create_warm(
            self._client, self.label, shape.image_id, shape.limits, mode, SUPERVISOR, labels,
            idle_s=IDLE_S, under=Path(self._dir.name), tree_mount=self._tree_mount,
        )  # fmt: skip
        try:
            warm.container.start()
            warm.started = True
        except BaseException:
            _remove_all([warm])
            raise
        self.started_total += 1
        return warm


def _usable(ready: Ready) -> bool:
    return time.monotonic() - ready.born < MAX_AGE_S and ready.warm.stream is not None and not ready.warm.stream.ended


def _remove_all(warms: list[Warm]) -> None:
    """Remove them side by side: each removal waits on the engine (a running container is killed first)."""

    def remove(warm: Warm) -> None:
        with contextlib.suppress(OSError, SandboxError):
            warm.remove()

    if len(warms) <= 1:
        list(map(remove, warms))
        return
    with ThreadPoolExecutor(max_workers=min(8, len(warms)), thread_name_prefix="probegate-pool-remove") as pool:
        list(pool.map(remove, warms))
