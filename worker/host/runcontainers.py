"""The containers one sandbox keeps for its open runs: created empty, started ahead as spares
(`prestart`), bound to a batch's tree and clock when one needs them, taken back warm after a clean
batch, and removed when the run closes. Which trials run in them is worker/host/sandboxes/docker.py's business."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import docker

from gate.core.errors import SandboxError
from gate.core.suite.trial import Limits, TrialSpec, WorkCopy
from worker.host.batchfile import supervisor_env
from worker.host.container import BOX, HELPERS, IDLE_S, ReportStream, batch_labels, create_container, stage_mount
from worker.host.engine import container_by_id, containers, has_image
from worker.host.poolclient import Lease, Slot
from worker.host.sweep import LABEL_PID, LABEL_RUN
from worker.host.treemount import dir_prefix, enabled, is_shared, make_shared, remove_dir
from worker.host.warm import UNBOUND_CLOCK, BoundShape, IdleContainers, SpareShape, Warm

EXIT_WAIT_S = 0.5  # how long a supervisor that reported every trial has to exit before it is killed
SPARE_WAIT_S = 30.0  # how long a batch or a close waits for a spare still being started
SUPERVISOR = BOX / "supervisor.py"  # only a sandbox running this one takes from the standing pool


class RunContainers:
    """Run-scoped containers of one sandbox (thread-safe: the local executor acquires from many threads)."""

    def __init__(
        self,
        client: Callable[[], docker.DockerClient],
        image: str,
        resolve_image: Callable[[], str],
        *,
        supervisor: Path,
        worker_id: str,
        max_idle: int,
        work_copy: Callable[[], tuple[WorkCopy, str]] = lambda: (WorkCopy.COPY, ""),
        pool: Path | None = None,
        tree_mount: bool = True,
    ) -> None:
        self._client = client
        self._work_copy = work_copy  # the mode new containers are asked for, and why copy if it is
        self.image = image
        self._resolve_image = resolve_image
        self.supervisor = supervisor
        self.worker_id = worker_id
        self._idle = IdleContainers(max_idle)
        self._starter = ThreadPoolExecutor(max_workers=4, thread_name_prefix="probegate-prestart")
        self._pool_path = pool  # a standing pool's socket (worker/host/pool.py), or None
        self._tree_mount = tree_mount  # False: PROBEGATE_TREE_MOUNT=off, trees are linked in
        self._leases: dict[str, list[Lease]] = {}
        self._leases_lock = threading.Lock()
        self.pool_note = ""  # why the pool gave nothing the last time it failed (tests, benchmarks)
        self._pool_dry: set[str] = set()  # open runs the pool had nothing for: asked no more
        # Runs told to stop (Ctrl-C): no container is made for them any more, and one whose creation
        # was already on its way when `drop` listed the run's containers is removed by its creator.
        self._aborted: set[str] = set()

    def open(self, run_id: str) -> None:
        self._idle.open(run_id)

    def is_open(self, run_id: str) -> bool:
        return self._idle.is_open(run_id)

    def image_for(self, run_ids: set[str], wanted: str = "") -> str:
        """The image ID a batch runs in: `wanted` (the run's, which must be on this engine) or, when
        the run names none, this sandbox's own tag's. Looked up once per open run: its warm
        containers are fixed to that image anyway, and asking the engine costs ~4 ms per batch."""
        [run_id] = run_ids if len(run_ids) == 1 else [""]
        known = self._idle.image_of(run_id)
        if known is not None and known == (wanted or known):
            return known
        if wanted and not has_image(self._client(), wanted):
            raise SandboxError(f"image {wanted} is not on this engine")
        image_id = wanted or self._resolve_image()
        self._idle.remember_image(run_id, image_id)
        return image_id

    def prestart(self, run_id: str, limits: Limits, count: int) -> None:
        """Start `count` containers for the open run in the background; its first batches bind them
        instead of paying a container start (~300 ms here) themselves. A standing pool gives what it
        has ready; the rest are started here."""
        if run_id in self._aborted:
            return
        for warm in self._from_pool(run_id, limits, count):
            done: Future[Warm] = Future()
            done.set_result(warm)
            if not self._idle.add_spare(SpareShape(run_id, limits, self.image), done):
                warm.remove()
            count -= 1
        for _ in range(count):
            starting = self._starter.submit(self._start_spare, run_id, limits)
            if not self._idle.add_spare(SpareShape(run_id, limits, self.image), starting):
                _removed(starting)

    def acquire(self, shape: BoundShape, first: TrialSpec, tree: Path) -> Warm:
        """A container bound to `shape`: a warm one of the run, a spare started for it, one from the
        standing pool (a run nobody prestarted for: a gate-worker's), or a new one (created, not yet started)."""
        if self._idle.is_open(shape.run_id):
            if (warm := self._idle.checkout(shape)) is not None:
                return warm
            while (starting := self._idle.take_spare(shape.spare(self.image))) is not None:
                warm = _started(starting)
                if warm is not None and warm.image_id == shape.image_id and not warm.stream.ended:
                    return _bound(warm, shape, tree)
                if warm is not None:
                    warm.remove()
            if (pooled := self._pool_one(shape)) is not None:
                return _bound(pooled, shape, tree)
        created = self._create(shape.run_id, shape.limits, shape.image_id, first.property_id, first.trial_index)
        return _bound(created, shape, tree)

    def release(self, warm: Warm, *, clean: bool, aborted: bool) -> None:
        """Take a container back after a batch: kept warm if its batch ended `clean` and the run is
        open with room in the pool, else removed."""
        if clean and self._idle.checkin(warm):
            return
        # A healthy supervisor is first asked to exit: removing an exited container is far cheaper
        # than killing a running one. One that lingers is killed.
        if clean or (warm.stream is not None and not warm.stream.ended and not aborted):
            warm.stop()
            warm.stream.wait_eof(time.monotonic() + EXIT_WAIT_S)
        warm.remove()

    def close(self, run_id: str) -> int:
        """The run is over: remove its warm containers and spares (and any other this process left for it)."""
        self._pool_dry.discard(run_id)
        warms, spares = self._idle.close(run_id)
        warms += [warm for starting in spares if (warm := _started(starting)) is not None]
        for warm in warms:
            warm.stop()  # all at once: each supervisor exits by itself within milliseconds
        deadline = time.monotonic() + EXIT_WAIT_S

        pool_alive = self._pool_alive(run_id)

        def remove(warm: Warm) -> None:
            if warm.pooled and pool_alive:
                # Idle between batches (no probe runs in it): the pool force-removes it as soon as the
                # lease below closes, so the run does not wait for its supervisor to exit.
                warm.stream.close()
                return
            warm.stream.wait_eof(deadline)
            if warm.pooled and warm.container is not None:
                # Its pool is gone: nobody else would remove it, or its dirs, now.
                with contextlib.suppress(SandboxError):
                    warm.container.remove()
                remove_dir(warm.src_dir.parent)
            warm.remove()

        list(self._starter.map(remove, warms))  # in parallel: each removal waits on the engine
        mine = [f"{LABEL_RUN}={run_id}", f"{LABEL_PID}={os.getpid()}"]
        with contextlib.suppress(SandboxError):
            for container in containers(self._client(), labels=mine):
                with contextlib.suppress(SandboxError):
                    container.remove()
        self._end_leases(run_id)  # the pool removes what the run took from it
        return len(warms)

    def drop(self, run_id: str) -> None:
        """Close the run at once: make nothing more for it, and remove what it kept without asking
        supervisors to exit (spares still starting are removed by their starters, not waited for)."""
        self._aborted.add(run_id)
        self._pool_dry.discard(run_id)
        warms, spares = self._idle.close(run_id)
        for starting in spares:
            if starting.done():
                warms += [warm] if (warm := _started(starting)) is not None else []
        list(self._starter.map(Warm.remove, warms))  # in parallel: each removal waits on the engine
        self._end_leases(run_id)

    def aborted(self, run_id: str) -> bool:
        """Whether `drop` stopped this run (its batches then start no container)."""
        return run_id in self._aborted

    def _pool_one(self, shape: BoundShape) -> Warm | None:
        """One started container of the batch's image and limits from the standing pool, or None; a
        run the pool once had nothing for asks no more (its batches start their own)."""
        if self._pool_path is None or shape.run_id in self._pool_dry:
            return None
        [warm] = self._from_pool(shape.run_id, shape.limits, 1, shape.image_id) or [None]
        if warm is None:
            self._pool_dry.add(shape.run_id)
        return warm

    def _from_pool(self, run_id: str, limits: Limits, count: int, image_id: str = "") -> list[Warm]:
        """Up to `count` started containers from the standing pool (of `image_id`, else this sandbox's
        image), held on a lease of this run; none when there is no pool, it has none of this shape, or
        anything about it is amiss."""
        if self._pool_path is None or count <= 0 or self.supervisor != SUPERVISOR or not self._idle.is_open(run_id):
            return []
        try:
            lease = Lease(self._pool_path)
        except OSError as exc:
            self.pool_note = f"{type(exc).__name__}: {exc}"
            return []
        with self._leases_lock:
            self._leases.setdefault(run_id, []).append(lease)
        mode, note = self._work_copy()
        try:
            image_id = image_id or self._resolve_image()
            slots = lease.take(count, image_id, limits, mode, run_id=run_id)
            warms = [_pooled(self._client(), run_id, slot, image_id, (mode, note), self._tree_mount) for slot in slots]
        except (OSError, ValueError, KeyError, SandboxError) as exc:
            self.pool_note = f"{type(exc).__name__}: {exc}"
            return []  # what was taken goes back with the lease when the run closes
        return warms

    def _pool_alive(self, run_id: str) -> bool:
        with self._leases_lock:
            leases = list(self._leases.get(run_id, []))
        return all(lease.alive() for lease in leases)

    def _end_leases(self, run_id: str) -> None:
        with self._leases_lock:
            leases = self._leases.pop(run_id, [])
        for lease in leases:
            lease.close()

    def _start_spare(self, run_id: str, limits: Limits) -> Warm:
        warm = self._create(run_id, limits, self._resolve_image(), "", 0)
        try:
            warm.container.start()
            warm.started = True
            self._refuse_if_aborted(run_id)
        except BaseException:
            warm.remove()
            raise
        return warm

    def _create(self, run_id: str, limits: Limits, image_id: str, property_id: str, first_trial: int) -> Warm:
        """A created (not yet started) container for one run, its report stream attached; `bind`
        gives it a tree and a clock. For a dropped run: SandboxError, and nothing left behind."""
        self._refuse_if_aborted(run_id)
        labels = batch_labels(run_id, property_id, first_trial, uuid.uuid4().hex, self.worker_id)
        mode, note = self._work_copy()
        warm = create_warm(
            self._client(), run_id, image_id, limits, (mode, note), self.supervisor, labels, tree_mount=self._tree_mount
        )
        try:
            # `drop` may have listed the run's containers while this one was being made: remove it ourselves.
            self._refuse_if_aborted(run_id)
        except BaseException:
            warm.remove()
            raise
        return warm

    def _refuse_if_aborted(self, run_id: str) -> None:
        if run_id in self._aborted:
            raise SandboxError("run aborted")


def create_warm(
    client: docker.DockerClient,
    run_id: str,
    image_id: str,
    limits: Limits,
    work_copy: tuple[WorkCopy, str],
    supervisor: Path,
    labels: dict[str, str],
    *,
    idle_s: float = IDLE_S,
    under: Path | None = None,
    tree_mount: bool = True,
) -> Warm:
    """A created (not yet started) container with its own host dirs (in a temp dir under `under`),
    its report stream attached; `bind` gives it a tree and a clock. Every sandbox container, pooled
    or not, is made here: the same mounts and the same lockdown (create_container)."""
    tmp = tempfile.TemporaryDirectory(prefix=dir_prefix(), dir=under)
    root = Path(tmp.name)
    (root / "opt").mkdir()
    (root / "src").mkdir(mode=0o755)
    (root / "stage").mkdir(mode=0o700)
    # 0700: a tree linked into src/ is owned by the sandbox uid, which no host process may reach; the
    # container sees each bind mount from its own root, past no dir of ours.
    root.chmod(0o700)
    warm = Warm(run_id, tmp, root / "opt" / "in", root / "src")
    warm.image_id = image_id
    try:
        warm.tree_mount = tree_mount and make_shared(warm.src_dir)
        warm.work_copy, warm.work_copy_note = work_copy
        stage_mount(root / "opt", supervisor)
        (warm.in_dir / "faketimerc").write_text(UNBOUND_CLOCK + "\n")
        (warm.in_dir / "faketimerc").chmod(0o644)
        warm.container = create_container(
            client,
            image_id,
            tree=warm.src_dir,
            mount_dir=root / "opt",
            limits=limits,
            env=supervisor_env(),
            labels=labels,
            work_copy=warm.work_copy,
            idle_s=idle_s,
            tree_propagates=warm.tree_mount,
        )
        warm.stream = ReportStream(warm.container)
    except BaseException:
        warm.remove()
        raise
    return warm


def _pooled(
    client: docker.DockerClient, run_id: str, slot: Slot, image_id: str, copy: tuple[WorkCopy, str], tree_mount: bool
) -> Warm:
    """A Warm over a started container the pool handed over, checked first: its staged supervisor
    code must be ours byte for byte (a pool of another probegate version is not used)."""
    opt = slot.root / "opt"
    for name, source in (("supervisor.py", SUPERVISOR), *((h.name, h) for h in HELPERS)):
        if (opt / name).read_bytes() != source.read_bytes():
            raise ValueError(f"the pool's {name} differs from ours")
    warm = Warm(run_id, _NoDir(), opt / "in", slot.root / "src")
    warm.pooled = True
    warm.tree_mount = tree_mount and enabled() and is_shared(warm.src_dir)
    warm.image_id = image_id
    warm.work_copy, warm.work_copy_note = copy
    warm.container = container_by_id(client, slot.container_id)
    warm.stream = ReportStream(warm.container)  # logs=True: nothing it printed before is missed
    warm.started = True
    return warm


class _NoDir:
    """A pooled container's dirs are the pool's to remove."""

    def cleanup(self) -> None:
        pass


def _bound(warm: Warm, shape: BoundShape, tree: Path) -> Warm:
    try:
        warm.bind(shape, tree)
    except BaseException:
        warm.remove()
        raise
    return warm


def _started(starting: Future[Warm]) -> Warm | None:
    """The spare once started, or None when starting it failed (the batch then starts its own)."""
    try:
        return starting.result(timeout=SPARE_WAIT_S)
    except Exception:
        return None


def _removed(starting: Future[Warm]) -> None:
    if (warm := _started(starting)) is not None:
        warm.remove()
