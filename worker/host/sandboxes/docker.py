"""DockerSandbox: runs batches of trials in network-less containers under the in-container
supervisor (a fresh process and a fresh work copy per trial), reading one report line per trial.
For an open run (`open`..`close`) a container serves batch after batch (see worker/host/runcontainers.py)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path

import docker

from gate.core.errors import GateError, SandboxError, last_line
from gate.core.suite.sandbox import Inputs
from gate.core.suite.trial import FaultOrigin, Limits, Observation, TrialSpec, WorkCopy
from gate.io.hostsettings import HostSettings
from worker.host import workcopy
from worker.host.batchfile import batch_file, container_groups
from worker.host.container import (
    BOX,
    EOF,
    report_observation,
)
from worker.host.engine import DEFAULT_IMAGE, Container, docker_client, resolve_image_id, security_options
from worker.host.poolclient import pool_socket
from worker.host.runcontainers import RunContainers
from worker.host.sweep import sweep, sweep_dead_workers
from worker.host.warm import BoundShape, Warm

SUPERVISOR = BOX / "supervisor.py"
HARNESS, PATCH, UNKNOWN = FaultOrigin.HARNESS, FaultOrigin.PATCH, FaultOrigin.UNKNOWN
POLL_S = 0.25  # how often a wait for a report line looks at the abort flag


class DockerSandbox:
    """The gate.core.suite.trial.Sandbox protocol over a local Docker engine. Between `open(run_id)` and
    `close(run_id)` containers are run-scoped: up to `max_idle` warm ones wait for the run's next
    batch. Otherwise one container per batch (`per_trial=True`: one per trial, kept for comparison).
    `host`: the host's settings the entry point read (PROBEGATE_WORK_COPY, PROBEGATE_POOL,
    PROBEGATE_TREE_MOUNT; None: a bare environment's); `work_copy` ("overlay" or "copy") and `pool` (a
    standing pool's socket, "off": none) override its mode and pool (worker/host/workcopy.py, poolclient.py);
    `timings` asks the supervisor where each trial's time went (a report's `steps_s`, for the benchmarks)."""

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        image: str = DEFAULT_IMAGE,
        worker_id: str | None = None,
        *,
        grace_s: float = 15.0,
        supervisor: Path = SUPERVISOR,
        per_trial: bool = False,
        max_idle: int | None = None,
        work_copy: str | None = None,
        pool: str | Path | None = None,
        timings: bool = False,
        host: HostSettings | None = None,
    ) -> None:
        host = host or HostSettings()
        self._client = client
        self._client_lock = threading.Lock()  # the local executor calls run_batch from several threads
        self.image = image
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        # Host-side slack beyond a probe's deadline: container start, tree copy, snapshots, report.
        self.grace_s = grace_s
        self.supervisor = Path(supervisor).resolve()
        self.per_trial = per_trial
        self.timings = timings
        self._aborted: set[str] = set()
        self._swept = False
        self.swept = 0  # containers of dead processes removed at the first open
        self._wanted = workcopy.wanted(work_copy, host.work_copy)  # at once: a bad word is a UsageError
        self._work_copy: tuple[WorkCopy, str] | None = None  # decided at the first container
        self._containers = RunContainers(
            lambda: self.client,
            image,
            self.image_id,
            supervisor=self.supervisor,
            worker_id=self.worker_id,
            max_idle=max_idle or os.cpu_count() or 4,
            work_copy=self.work_copy,
            pool=pool_socket(pool, host),
            tree_mount=host.tree_mount,
        )

    @property
    def client(self) -> docker.DockerClient:
        with self._client_lock:
            if self._client is None:
                self._client = docker_client()
            return self._client

    def image_id(self) -> str:
        """The ID of the image trials run in; raises SandboxError when it is not available."""
        return resolve_image_id(self.client, self.image)

    def work_copy(self) -> tuple[WorkCopy, str]:
        """The mode this sandbox's new containers are asked for, and why copy when it is copy: the
        option or PROBEGATE_WORK_COPY, unless this host or engine cannot give overlay mode (decided
        once; a container's supervisor may still fall back, and then says why)."""
        with self._client_lock:
            decided = self._work_copy
        if decided is None:
            mode, note = self._wanted
            if mode is WorkCopy.OVERLAY:
                refused = workcopy.engine_refusal(security_options(self.client))
                mode, note = (WorkCopy.COPY, refused) if refused else (mode, note)
            with self._client_lock:
                decided = self._work_copy = self._work_copy or (mode, note)
        return decided

    def use_copy(self, why: str) -> None:
        """Ask every container created from now on for copy mode, saying why (the preflight's finding)."""
        with self._client_lock:
            self._work_copy = (WorkCopy.COPY, why)

    def run_batch(self, specs: list[TrialSpec], inputs: Inputs) -> list[Observation]:
        """One observation per spec, in order, run in the spec's image (this sandbox's own when the
        spec names none); an image this engine lacks is a harness fault, never a run in another.
        Trials sharing a tree and image share a container."""
        run_ids = {spec.run_id for spec in specs}
        images: dict[str, str | SandboxError] = {}
        for wanted in dict.fromkeys(spec.image_id for spec in specs):
            try:
                images[wanted] = self._containers.image_for(run_ids, wanted)
            except SandboxError as exc:
                images[wanted] = exc
        observed: dict[int, Observation] = {}
        by_image: dict[str, list[tuple[int, TrialSpec]]] = {}
        for position, spec in enumerate(specs):
            image = images[spec.image_id]
            if isinstance(image, SandboxError):
                observed[position] = Observation.harness_fault(
                    spec, str(image), origin=HARNESS, worker_id=self.worker_id
                )
            else:
                by_image.setdefault(image, []).append((position, spec))
        try:
            for image_id, runnable in by_image.items():
                for group in container_groups([s for _, s in runnable], self.per_trial):
                    positions = [p for p, _ in runnable[: len(group)]]
                    runnable = runnable[len(group) :]
                    observed.update(zip(positions, self._run_group(group, inputs, image_id), strict=True))
        except (KeyboardInterrupt, SystemExit):
            for run_id in {spec.run_id for spec in specs}:
                self.abort(run_id)
            raise
        return [observed[p] for p in range(len(specs))]

    def open(self, run_id: str) -> None:
        """Keep the run's containers warm between batches until `close(run_id)` or `abort(run_id)`.
        The first open in a sandbox also removes what dead processes on this host left behind."""
        if not self._swept:
            self._swept = True
            # A coordinator killed outright, or cut off by an engine restart, could not remove its
            # containers; workers sweep at start, and so does a run (only processes that are gone).
            with contextlib.suppress(SandboxError):  # no engine: the run's own trials will say so
                self.swept = sweep_dead_workers(self.client)
        self._containers.open(run_id)

    def prestart(self, run_id: str, limits: Limits, count: int) -> None:
        """Start `count` containers for the open run in the background; its first batches bind them
        to their tree and clock instead of paying a container start themselves."""
        self._containers.prestart(run_id, limits, count)

    def close(self, run_id: str) -> int:
        """The run is over: remove its warm containers (and any other this process left for it)."""
        return self._containers.close(run_id)

    def abort(self, run_id: str) -> int:
        """Stop the run now: refuse its remaining trials and remove the containers this process made
        for it (from any thread; another process's share of the run is that process's to stop)."""
        self._aborted.add(run_id)
        self._containers.drop(run_id)
        with contextlib.suppress(SandboxError):
            return sweep(self.client, run_id, pid=os.getpid())
        return 0

    def _fault(self, spec: TrialSpec, detail: str, image_id: str, origin: FaultOrigin) -> Observation:
        return Observation.harness_fault(spec, detail, origin=origin, worker_id=self.worker_id, image_id=image_id)

    def _run_group(self, group: list[TrialSpec], inputs: Inputs, image_id: str) -> list[Observation]:
        """Observations for specs sharing a container shape; a lost container is replaced for the rest."""
        try:
            tree = inputs.tree_dir(group[0].tree_digest)
            fixtures = {s.fixture_digest: inputs.fixture_bytes(s.fixture_digest) for s in group}
        except (GateError, OSError, KeyError) as exc:
            return [self._fault(s, f"trial inputs unavailable: {exc}", image_id, HARNESS) for s in group]
        done: list[Observation] = []
        while len(done) < len(group):
            pending = group[len(done) :]
            if pending[0].run_id in self._aborted:
                aborted = (self._fault(s, "run aborted before this trial started", image_id, HARNESS) for s in pending)
                return [*done, *aborted]
            got = self._one_container(pending, fixtures, tree, image_id)
            done += got or [self._fault(pending[0], "container ended without a report", image_id, UNKNOWN)]
        return done

    def _one_container(
        self, pending: list[TrialSpec], fixtures: dict[str, bytes], tree: Path, image_id: str
    ) -> list[Observation]:
        """Run `pending` in a warm container of its shape (or a new one); returns observations for a
        non-empty prefix of it. The container goes back to the pool only if its supervisor said done."""
        first = pending[0]
        warm = None
        try:
            warm = self._containers.acquire(BoundShape.of(first, image_id), first, tree)
            seq = warm.send(
                batch_file(pending, timings=self.timings),
                {s.fixture_digest: fixtures[s.fixture_digest] for s in pending},
            )
        except (SandboxError, OSError, ValueError) as exc:
            if warm is not None:
                warm.remove()
            # The engine's faults are outside the patch; a failure laying out the tree may not be.
            origin = HARNESS if isinstance(exc, SandboxError) else UNKNOWN
            return [self._fault(s, f"container could not start: {last_line(exc)}", image_id, origin) for s in pending]
        keep = False
        try:
            started = time.monotonic()
            if not warm.started:
                warm.container.start()
                warm.started = True
            done = self._follow(warm, pending, image_id, started)
            if len(done) == len(pending):
                keep = self._finished(warm, seq)
            return done
        except SandboxError as exc:
            return [self._fault(s, f"container could not start: {last_line(exc)}", image_id, HARNESS) for s in pending]
        finally:
            self._containers.release(warm, clean=keep, aborted=warm.run_id in self._aborted)

    def _finished(self, warm: Warm, seq: int) -> bool:
        """Whether the supervisor ended batch `seq` cleanly and waits for the next in a run still open."""
        if warm.run_id in self._aborted or not self._containers.is_open(warm.run_id):
            return False
        item = warm.stream.next(self.grace_s)
        return isinstance(item, dict) and item.get("done") == seq and warm.run_id not in self._aborted

    def _follow(self, warm: Warm, pending: list[TrialSpec], image_id: str, started: float) -> list[Observation]:
        """Turn report lines into observations, one trial at a time, each under deadline + grace."""
        container, stream = warm.container, warm.stream
        done: list[Observation] = []
        for position, spec in enumerate(pending):
            budget = spec.deadline_s + self.grace_s
            while True:
                item = stream.next(min(POLL_S, started + budget - time.monotonic()))
                if item is not None or spec.run_id in self._aborted:
                    break
                if time.monotonic() - started >= budget:
                    # The deadline is the host's to enforce too: a stuck supervisor must not pin the worker.
                    with contextlib.suppress(SandboxError):
                        container.kill()
                    return [*done, self._timed_out(spec, time.monotonic() - started, image_id)]
            if spec.run_id in self._aborted:
                return [*done, *(self._fault(s, "run aborted", image_id, HARNESS) for s in pending[position:])]
            if item is EOF or not isinstance(item, dict):
                return [*done, self._lost(container, spec, image_id)]
            if "batch_error" in item:
                # Before any trial of the batch: the batch file or the clock, neither of them the patch's.
                why = f"supervisor: {item['batch_error']}"
                return [*done, *(self._fault(s, why, image_id, HARNESS) for s in pending[position:])]
            if "reset_error" in item:
                return done  # the supervisor could not clean up after the last trial: go on in a new container
            if item.get("id") != str(position) or "error" in item:
                why = item.get("error") or f"unexpected report {str(item)[:200]}"
                # The supervisor says when the tree or the probe broke the trial; nothing else is proven.
                origin = PATCH if item.get("origin") == "patch" and "error" in item else UNKNOWN
                return [*done, self._fault(spec, f"supervisor: {why}", image_id, origin)]
            done.append(self._observation(spec, image_id, item, warm.work_copy_note))
            started = time.monotonic()
        return done

    def _timed_out(self, spec: TrialSpec, duration: float, image_id: str) -> Observation:
        return Observation.of(
            spec,
            timed_out=True,
            signal=9,
            duration_s=duration,
            image_id=image_id,
            worker_id=self.worker_id,
            hash_seed=spec.hash_seed,
        )

    def _lost(self, container: Container, spec: TrialSpec, image_id: str) -> Observation:
        """The container ended before reporting this trial: the probe's OOM, or the harness's fault."""
        try:
            state, tail = container.ended(timeout_s=10)
        except SandboxError as exc:
            return self._fault(spec, f"docker daemon error reading the result: {last_line(exc)}", image_id, HARNESS)
        if state.get("OOMKilled"):
            # The memory cgroup took the supervisor down with the probe: the probe's doing.
            return Observation.of(
                spec,
                oom_killed=True,
                signal=9,
                image_id=image_id,
                worker_id=self.worker_id,
                hash_seed=spec.hash_seed,
            )
        code = state.get("ExitCode")
        why = f"supervisor gave no report (container exit {code}): {last_line(tail)}"
        return self._fault(spec, why, image_id, UNKNOWN)

    def _observation(self, spec: TrialSpec, image_id: str, report: dict, note: str = "") -> Observation:
        try:
            return report_observation(spec, report, image_id=image_id, worker_id=self.worker_id, work_copy_note=note)
        except (KeyError, TypeError, ValueError) as exc:
            return self._fault(spec, f"supervisor report malformed: {last_line(exc)}", image_id, UNKNOWN)
