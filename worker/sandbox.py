"""DockerSandbox: runs a batch of trials in one network-less container under the in-container
supervisor (a fresh process and a fresh work copy per trial), reading one report line per trial."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker

from gate.errors import GateError, SandboxError
from gate.trial import Inputs, Observation, TrialSpec
from worker.container import (
    EOF,
    IN_DIR,
    ReportStream,
    batch_labels,
    create_container,
    report_observation,
    stage_mount,
)
from worker.image import DEFAULT_IMAGE, DOCKER_ERRORS, docker_client, resolve_image_id
from worker.sweep import sweep

SUPERVISOR = Path(__file__).resolve().with_name("supervisor.py")
WRITABLE_ROOTS = ("/work", "/tmp", "/dev/shm", "/dev/mqueue")
POLL_S = 0.25  # how often a wait for a report line looks at the abort flag
EXIT_WAIT_S = 0.5  # how long a supervisor that reported every trial has to exit before it is killed


def probe_env(spec: TrialSpec) -> dict[str, str]:
    """The probe's whole environment (nothing inherited from the image or the host)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TZ": spec.clock.zone,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        # Otherwise libfaketime leaves /dev/shm/faketime_shm_* files that look like probe writes.
        "FAKETIME_DISABLE_SHM": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PROBEGATE_TRIAL_INDEX": str(spec.trial_index),
        "PROBEGATE_PROPERTY": spec.property_id,
    }


def container_groups(specs: list[TrialSpec], per_trial: bool) -> Iterator[list[TrialSpec]]:
    """Runs of consecutive specs that can share one container: same tree, clock and limits."""
    group: list[TrialSpec] = []
    for spec in specs:
        if group and (per_trial or _shape(group[0]) != _shape(spec)):
            yield group
            group = []
        group.append(spec)
    if group:
        yield group


def _shape(spec: TrialSpec) -> tuple[object, ...]:
    return (spec.tree_digest, spec.clock, spec.limits)


class DockerSandbox:
    """The gate.trial.Sandbox protocol over a local Docker engine: one container per batch
    (`per_trial=True`: one per trial, the old path, kept for comparison)."""

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        image: str = DEFAULT_IMAGE,
        worker_id: str | None = None,
        *,
        grace_s: float = 15.0,
        supervisor: Path = SUPERVISOR,
        per_trial: bool = False,
    ) -> None:
        self._client = client
        self._client_lock = threading.Lock()  # the local executor calls run_batch from several threads
        self.image = image
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        # Host-side slack beyond a probe's deadline: container start, tree copy, snapshots, report.
        self.grace_s = grace_s
        self.supervisor = Path(supervisor).resolve()
        self.per_trial = per_trial
        self._aborted: set[str] = set()

    @property
    def client(self) -> docker.DockerClient:
        with self._client_lock:
            if self._client is None:
                self._client = docker_client()
            return self._client

    def image_id(self) -> str:
        """The ID of the image trials run in; raises SandboxError when it is not available."""
        return resolve_image_id(self.client, self.image)

    def run_batch(self, specs: list[TrialSpec], inputs: Inputs) -> list[Observation]:
        """One observation per spec, in order; trials sharing a tree share a container."""
        try:
            image_id = self.image_id()
        except SandboxError as exc:
            return [Observation.harness_fault(s, str(exc), worker_id=self.worker_id) for s in specs]
        observed: dict[int, Observation] = {}
        runnable = []
        for position, spec in enumerate(specs):
            if spec.image_id and spec.image_id != image_id:
                detail = f"worker image {image_id} differs from the run's {spec.image_id}"
                observed[position] = self._fault(spec, detail, image_id)
            else:
                runnable.append((position, spec))
        try:
            for group in container_groups([s for _, s in runnable], self.per_trial):
                positions = [p for p, _ in runnable[: len(group)]]
                runnable = runnable[len(group) :]
                observed.update(zip(positions, self._run_group(group, inputs, image_id), strict=True))
        except (KeyboardInterrupt, SystemExit):
            for run_id in {spec.run_id for spec in specs}:
                with contextlib.suppress(*DOCKER_ERRORS):
                    sweep(self.client, run_id)
            raise
        return [observed[p] for p in range(len(specs))]

    def abort(self, run_id: str) -> int:
        """Stop the run now: refuse its remaining trials and remove its containers (from any thread)."""
        self._aborted.add(run_id)
        with contextlib.suppress(*DOCKER_ERRORS):
            return sweep(self.client, run_id)
        return 0

    def _fault(self, spec: TrialSpec, detail: str, image_id: str) -> Observation:
        return Observation.harness_fault(spec, detail, worker_id=self.worker_id, image_id=image_id)

    def _run_group(self, group: list[TrialSpec], inputs: Inputs, image_id: str) -> list[Observation]:
        """Observations for specs sharing a container shape; a lost container is replaced for the rest."""
        try:
            tree = inputs.tree_dir(group[0].tree_digest)
            fixtures = {s.fixture_digest: inputs.fixture_bytes(s.fixture_digest) for s in group}
        except (GateError, OSError, KeyError) as exc:
            return [self._fault(s, f"trial inputs unavailable: {exc}", image_id) for s in group]
        with tempfile.TemporaryDirectory(prefix="probegate-batch-") as tmp:
            try:
                in_dir = stage_mount(Path(tmp), self.supervisor)
                self._write_inputs(in_dir, group[0], fixtures)
            except (OSError, ValueError) as exc:
                return [self._fault(s, f"trial files could not be written: {_one_line(exc)}", image_id) for s in group]
            done: list[Observation] = []
            while len(done) < len(group):
                pending = group[len(done) :]
                if pending[0].run_id in self._aborted:
                    return [
                        *done,
                        *(self._fault(s, "run aborted before this trial started", image_id) for s in pending),
                    ]
                got = self._one_container(pending, in_dir, tree, image_id)
                done += got or [self._fault(pending[0], "container ended without a report", image_id)]
        return done

    def _write_inputs(self, in_dir: Path, first: TrialSpec, fixtures: dict[str, bytes]) -> None:
        in_dir.chmod(0o755)  # the container runs as nobody
        files = {f"stdin-{digest}": data for digest, data in fixtures.items()}
        files["faketimerc"] = (first.clock.faketimerc() + "\n").encode()
        for name, data in files.items():
            path = in_dir / name
            path.write_bytes(data)
            path.chmod(0o444)

    def _batch_file(self, in_dir: Path, pending: list[TrialSpec]) -> None:
        trials = [
            {
                "id": str(position),
                "argv": list(spec.probe_argv),
                "deadline_s": spec.deadline_s,
                "output_cap_bytes": spec.limits.output_cap_bytes,
                "stdin": f"{IN_DIR}/stdin-{spec.fixture_digest}",
                "env": probe_env(spec),
                "canary": spec.canary,
            }
            for position, spec in enumerate(pending)
        ]
        batch = {
            "writable_roots": list(WRITABLE_ROOTS),
            "frozen_epoch": pending[0].clock.frozen_at.timestamp(),
            "trials": trials,
        }
        path = in_dir / "trials.json"
        path.unlink(missing_ok=True)  # a fresh file per container: the last one's may still be mapped
        path.write_text(json.dumps(batch))
        path.chmod(0o444)

    def _one_container(self, pending: list[TrialSpec], in_dir: Path, tree: Path, image_id: str) -> list[Observation]:
        """Run `pending` in one fresh container; returns observations for a non-empty prefix of it."""
        first = pending[0]
        try:
            self._batch_file(in_dir, pending)
            labels = batch_labels(first.run_id, first.property_id, first.trial_index, uuid.uuid4().hex, self.worker_id)
            container = create_container(
                self.client,
                image_id,
                tree=tree,
                mount_dir=in_dir.parent,
                limits=first.limits,
                env=probe_env(first),
                labels=labels,
            )
        except (*DOCKER_ERRORS, OSError) as exc:
            return [self._fault(s, f"container could not start: {_one_line(exc)}", image_id) for s in pending]
        stream = None
        try:
            stream = ReportStream(container)
            started = time.monotonic()
            container.start()
            done = self._follow(container, stream, pending, image_id, started)
            if len(done) == len(pending):
                # Let the supervisor finish and exit by itself: removing an exited container is far
                # cheaper than killing a running one. A supervisor that lingers is killed as before.
                stream.wait_eof(time.monotonic() + EXIT_WAIT_S)
            return done
        except DOCKER_ERRORS as exc:
            return [self._fault(s, f"container could not start: {_one_line(exc)}", image_id) for s in pending]
        finally:
            if stream is not None:
                stream.close()
            with contextlib.suppress(*DOCKER_ERRORS):
                container.remove(force=True)

    def _follow(self, container: Any, stream: ReportStream, pending: list[TrialSpec], image_id: str, started: float):
        """Turn report lines into observations, one trial at a time, each under deadline + grace."""
        done: list[Observation] = []
        for position, spec in enumerate(pending):
            budget = spec.deadline_s + self.grace_s
            while True:
                item = stream.next(min(POLL_S, started + budget - time.monotonic()))
                if item is not None or spec.run_id in self._aborted:
                    break
                if time.monotonic() - started >= budget:
                    # The deadline is the host's to enforce too: a stuck supervisor must not pin the worker.
                    with contextlib.suppress(*DOCKER_ERRORS):
                        container.kill()
                    return [*done, self._timed_out(spec, time.monotonic() - started, image_id)]
            if spec.run_id in self._aborted:
                return [*done, *(self._fault(s, "run aborted", image_id) for s in pending[position:])]
            if item is EOF or not isinstance(item, dict):
                return [*done, self._lost(container, spec, image_id)]
            if "batch_error" in item:
                why = f"supervisor: {item['batch_error']}"
                return [*done, *(self._fault(s, why, image_id) for s in pending[position:])]
            if "reset_error" in item:
                return done  # the supervisor could not clean up after the last trial: go on in a new container
            if item.get("id") != str(position) or "error" in item:
                why = item.get("error") or f"unexpected report {str(item)[:200]}"
                return [*done, self._fault(spec, f"supervisor: {why}", image_id)]
            done.append(self._observation(spec, image_id, item))
            started = time.monotonic()
        return done

    def _timed_out(self, spec: TrialSpec, duration: float, image_id: str) -> Observation:
        return Observation(
            run_id=spec.run_id,
            property_id=spec.property_id,
            trial_index=spec.trial_index,
            timed_out=True,
            signal=9,
            duration_s=duration,
            image_id=image_id,
            worker_id=self.worker_id,
        )

    def _lost(self, container: Any, spec: TrialSpec, image_id: str) -> Observation:
        """The container ended before reporting this trial: the probe's OOM, or the harness's fault."""
        try:
            container.wait(timeout=10)
            container.reload()
            state = container.attrs["State"]
            tail = container.logs(stdout=False, stderr=True)[-500:].decode(errors="replace")
        except DOCKER_ERRORS as exc:
            return self._fault(spec, f"docker daemon error reading the result: {_one_line(exc)}", image_id)
        if state.get("OOMKilled"):
            # The memory cgroup took the supervisor down with the probe: the probe's doing.
            return Observation(
                run_id=spec.run_id,
                property_id=spec.property_id,
                trial_index=spec.trial_index,
                oom_killed=True,
                signal=9,
                image_id=image_id,
                worker_id=self.worker_id,
            )
        code = state.get("ExitCode")
        return self._fault(spec, f"supervisor gave no report (container exit {code}): {_one_line(tail)}", image_id)

    def _observation(self, spec: TrialSpec, image_id: str, report: dict) -> Observation:
        try:
            return report_observation(spec, report, image_id=image_id, worker_id=self.worker_id)
        except (KeyError, TypeError, ValueError) as exc:
            return self._fault(spec, f"supervisor report malformed: {_one_line(exc)}", image_id)


def _one_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
