"""DockerSandbox: runs each trial in a fresh network-less container under the in-container supervisor."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from zoneinfo import ZoneInfoNotFoundError

import docker
import docker.errors
from docker.types import Mount

from gate.errors import GateError, SandboxError
from gate.trial import Captured, FileChange, Inputs, Observation, TrialSpec
from worker.image import DEFAULT_IMAGE, DOCKER_ERRORS, docker_client, resolve_image_id
from worker.sweep import LABEL_HOST, LABEL_PID, LABEL_PROPERTY, LABEL_RUN, LABEL_TRIAL, sweep

SUPERVISOR = Path(__file__).resolve().with_name("supervisor.py")
MOUNT = "/opt/probegate"
WRITABLE_ROOTS = ("/work", "/tmp", "/dev/shm", "/dev/mqueue")


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


class DockerSandbox:
    """The gate.trial.Sandbox protocol over a local Docker engine: one container per trial."""

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        image: str = DEFAULT_IMAGE,
        worker_id: str | None = None,
        *,
        grace_s: float = 15.0,
        supervisor: Path = SUPERVISOR,
    ) -> None:
        self._client = client
        self._client_lock = threading.Lock()  # the local executor calls run_batch from several threads
        self.image = image
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        # Host-side slack beyond the probe deadline: container start, tree copy, snapshots, report.
        self.grace_s = grace_s
        self.supervisor = Path(supervisor).resolve()
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
        """One observation per spec, in order, each from its own container."""
        try:
            image_id = self.image_id()
        except SandboxError as exc:
            return [Observation.harness_fault(s, str(exc), worker_id=self.worker_id) for s in specs]
        try:
            return [self._run_one(spec, inputs, image_id) for spec in specs]
        except (KeyboardInterrupt, SystemExit):
            for run_id in {spec.run_id for spec in specs}:
                with contextlib.suppress(DOCKER_ERRORS):
                    sweep(self.client, run_id)
            raise

    def _fault(self, spec: TrialSpec, detail: str, image_id: str) -> Observation:
        return Observation.harness_fault(spec, detail, worker_id=self.worker_id, image_id=image_id)

    def abort(self, run_id: str) -> int:
        """Stop the run now: refuse its remaining trials and remove its containers (from any thread)."""
        self._aborted.add(run_id)
        with contextlib.suppress(*DOCKER_ERRORS):
            return sweep(self.client, run_id)
        return 0

    def _run_one(self, spec: TrialSpec, inputs: Inputs, image_id: str) -> Observation:
        if spec.run_id in self._aborted:
            return self._fault(spec, "run aborted before this trial started", image_id)
        try:
            tree = inputs.tree_dir(spec.tree_digest)
            fixture = inputs.fixture_bytes(spec.fixture_digest)
        except (GateError, OSError) as exc:
            return self._fault(spec, f"trial inputs unavailable: {exc}", image_id)
        with tempfile.TemporaryDirectory(prefix="probegate-trial-") as tmp:
            try:
                files = self._write_trial_files(Path(tmp), spec, fixture)
            except (OSError, ValueError, ZoneInfoNotFoundError) as exc:
                return self._fault(spec, f"trial files could not be written: {_one_line(exc)}", image_id)
            try:
                container = self._create(spec, image_id, tree, files)
            except DOCKER_ERRORS as exc:
                return self._fault(spec, f"container could not start: {_one_line(exc)}", image_id)
            try:
                return self._start_and_observe(container, spec, image_id)
            finally:
                with contextlib.suppress(DOCKER_ERRORS):
                    container.remove(force=True)

    def _write_trial_files(self, tmp: Path, spec: TrialSpec, fixture: bytes) -> dict[str, Path]:
        trial = {
            "argv": list(spec.probe_argv),
            "deadline_s": spec.deadline_s,
            "output_cap_bytes": spec.limits.output_cap_bytes,
            "stdin": f"{MOUNT}/stdin",
            "env": probe_env(spec),
            "writable_roots": list(WRITABLE_ROOTS),
        }
        files = {
            "trial.json": json.dumps(trial).encode(),
            "stdin": fixture,
            "faketimerc": (spec.clock.faketimerc() + "\n").encode(),
        }
        paths = {}
        for name, data in files.items():
            path = tmp / name
            path.write_bytes(data)
            path.chmod(0o444)  # the container runs as nobody
            paths[name] = path
        return paths

    def _create(self, spec: TrialSpec, image_id: str, tree: Path, files: dict[str, Path]):
        limits = spec.limits
        tmpfs_opts = f"size={limits.tmpfs_mb}m,mode=1777"
        sources = {
            "/src": Path(tree).resolve(),
            f"{MOUNT}/supervisor.py": self.supervisor,
            f"{MOUNT}/trial.json": files["trial.json"],
            f"{MOUNT}/stdin": files["stdin"],
            "/etc/faketimerc": files["faketimerc"],
        }
        # Mount, not `volumes=`: for a missing source `volumes=` silently creates an empty directory.
        mounts = [Mount(target, str(source), type="bind", read_only=True) for target, source in sources.items()]
        return self.client.containers.create(
            image_id,
            command=["python3", f"{MOUNT}/supervisor.py", f"{MOUNT}/trial.json"],
            network_mode="none",
            read_only=True,
            user="65534:65534",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=limits.pids,
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            nano_cpus=int(limits.cpus * 1e9),
            shm_size=f"{limits.tmpfs_mb}m",
            # /work is exec so a tree may run its own scripts; Docker's tmpfs default is noexec.
            tmpfs={"/work": tmpfs_opts + ",exec", "/tmp": tmpfs_opts},
            mounts=mounts,
            # No working_dir: with it, Docker 20.10 mounts the /work tmpfs as root 0755, ignoring mode=.
            environment=probe_env(spec),
            labels={
                LABEL_RUN: spec.run_id,
                LABEL_PROPERTY: spec.property_id,
                LABEL_TRIAL: str(spec.trial_index),
                "probegate.worker": self.worker_id,
                LABEL_HOST: socket.gethostname(),
                LABEL_PID: str(os.getpid()),
            },
        )

    def _start_and_observe(self, container, spec: TrialSpec, image_id: str) -> Observation:
        started = time.monotonic()
        try:
            container.start()
        except DOCKER_ERRORS as exc:
            return self._fault(spec, f"container could not start: {_one_line(exc)}", image_id)
        budget = spec.deadline_s + self.grace_s
        try:
            status = container.wait(timeout=budget)
        except DOCKER_ERRORS as exc:
            # Over the unix socket a read timeout arrives as a ConnectionError: tell them by the clock.
            if time.monotonic() - started < budget:
                return self._fault(spec, f"docker daemon error while waiting: {_one_line(exc)}", image_id)
            # The deadline is the host's to enforce too: a stuck supervisor must not pin the worker.
            with contextlib.suppress(DOCKER_ERRORS):
                container.kill()
            return Observation(
                run_id=spec.run_id,
                property_id=spec.property_id,
                trial_index=spec.trial_index,
                timed_out=True,
                signal=9,
                duration_s=time.monotonic() - started,
                image_id=image_id,
                worker_id=self.worker_id,
            )
        try:
            container.reload()
            oom_killed = bool(container.attrs["State"].get("OOMKilled"))
            stdout = container.logs(stdout=True, stderr=False)
        except DOCKER_ERRORS as exc:
            return self._fault(spec, f"docker daemon error reading the result: {_one_line(exc)}", image_id)
        return self._observation(container, spec, image_id, status, oom_killed, stdout)

    def _observation(self, container, spec, image_id, status, oom_killed, stdout) -> Observation:
        common = dict(
            run_id=spec.run_id,
            property_id=spec.property_id,
            trial_index=spec.trial_index,
            image_id=image_id,
            worker_id=self.worker_id,
            oom_killed=oom_killed,
        )
        report = _last_json_line(stdout)
        if report is None and oom_killed:
            # The memory cgroup took the supervisor down with the probe: the probe's doing.
            return Observation(**common, signal=9)
        if report is None:
            try:
                stderr = container.logs(stdout=False, stderr=True)[-500:].decode(errors="replace")
            except DOCKER_ERRORS:
                stderr = ""
            code = status.get("StatusCode")
            return self._fault(
                spec, f"supervisor gave no report (container exit {code}): {_one_line(stderr)}", image_id
            )
        if "error" in report:
            return self._fault(spec, f"supervisor: {report['error']}", image_id)
        try:
            return Observation(
                **common,
                exit_code=report["exit_code"],
                signal=report["signal"],
                timed_out=report["timed_out"],
                duration_s=report["duration_s"],
                stdout=_captured(report["stdout"]),
                stderr=_captured(report["stderr"]),
                writes=tuple(FileChange(path=w["path"], change=w["change"]) for w in report["writes"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            return self._fault(spec, f"supervisor report malformed: {_one_line(exc)}", image_id)


def _captured(stream: dict) -> Captured:
    return Captured(data=base64.b64decode(stream["data_b64"]), length=stream["length"], sha256=stream["sha256"])


def _last_json_line(stdout: bytes) -> dict | None:
    # Only the supervisor writes to the container's stdout; its report is the last line.
    lines = stdout.strip().splitlines()
    if not lines:
        return None
    try:
        report = json.loads(lines[-1])
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def _one_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
