"""The Docker calls of the sandbox: create a locked-down batch container, and read the
supervisor's report lines from it as they arrive, with a timeout the host enforces."""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import socket
import threading
import time
from pathlib import Path

import docker
from docker.types import Mount, Ulimit

from gate.core.errors import SandboxError
from gate.core.suite.trial import SANDBOX_UID, Captured, FileChange, Limits, Observation, TrialSpec, WorkCopy
from worker.host.engine import Container, create
from worker.host.sweep import LABEL_BATCH, LABEL_HOST, LABEL_PID, LABEL_PROPERTY, LABEL_RUN, LABEL_TRIAL
from worker.host.workcopy import security_options

MOUNT = "/opt/probegate"
IN_DIR = f"{MOUNT}/in"
# Empty mount points for overlay mode: the supervisor mounts the tree's read-only lower copy and each
# trial's scratch tmpfs (detached at once) on them, inside its own mount namespace.
LOWER, SCRATCH = f"{MOUNT}/lower", f"{MOUNT}/scratch"
BOX = Path(__file__).resolve().parents[1] / "box"  # the stdlib-only code mounted into the container
HELPERS = tuple(
    BOX / name
    for name in (
        "fsdiff.py",
        "lowerview.py",
        "probeproc.py",
        "workdir.py",
        "overlay.py",
        "nsfilter.py",
        "warmplan.py",
        "warmparent.py",
        "warmclient.py",
        "steps.py",
    )
)
EOF = object()  # the stream ended: the container exited or was removed
IDLE_S = 60.0  # the supervisor exits after this long without a batch (see worker/host/warm.py)


def stage_mount(mount_dir: Path, supervisor: Path) -> Path:
    """Lay out `mount_dir` as MOUNT: the supervisor, the modules it imports beside it, and an empty
    input dir (returned). One bind mount instead of three: each costs a container start ~5 ms."""
    mount_dir.chmod(0o755)  # the container runs as nobody
    for name, source in (("supervisor.py", supervisor), *((h.name, h) for h in HELPERS)):
        shutil.copyfile(source, mount_dir / name)
        (mount_dir / name).chmod(0o444)
    for name in ("lower", "scratch"):
        (mount_dir / name).mkdir()
        (mount_dir / name).chmod(0o755)
    in_dir = mount_dir / "in"
    in_dir.mkdir()
    in_dir.chmod(0o755)
    return in_dir


def create_container(
    client: docker.DockerClient,
    image_id: str,
    *,
    tree: Path,
    mount_dir: Path,
    limits: Limits,
    env: dict[str, str],
    labels: dict[str, str],
    work_copy: WorkCopy = WorkCopy.COPY,
    idle_s: float = IDLE_S,
    tree_propagates: bool = False,
) -> Container:
    """A stopped container that will run the supervisor over the batch files in `mount_dir` (see
    stage_mount), asked for `work_copy` work dirs (overlay adds its seccomp profile); its supervisor
    exits after `idle_s` without a batch. With `tree_propagates`, a tree mounted on `tree` later
    reaches /src (worker/host/treemount.py)."""
    tmpfs_opts = f"size={limits.tmpfs_mb}m,mode=1777"
    sources = {
        "/src": Path(tree).resolve(),
        MOUNT: mount_dir,
        "/etc/faketimerc": mount_dir / "in" / "faketimerc",
    }
    # Mount, not `volumes=`: for a missing source `volumes=` silently creates an empty directory.
    mounts = [
        Mount(target, str(source), type="bind", read_only=True, propagation=_propagation(target, tree_propagates))
        for target, source in sources.items()
    ]
    fsize = limits.file_size_mb * 1024 * 1024  # RLIMIT_FSIZE counts bytes
    return create(
        client,
        image_id,
        # -I: isolated from the image's environment (PYTHONPATH, user site) whatever a derived image sets;
        # -S: the supervisor is stdlib-only, and skipping site shortens every container's start.
        command=["python3", "-I", "-S", f"{MOUNT}/supervisor.py", IN_DIR, str(idle_s), work_copy.value],
        network_mode="none",
        # No libnetwork sandbox at all (the namespace holds only loopback): the engine then adds no
        # `libnetwork-setkey` hook, two re-executions of dockerd at each container's start.
        network_disabled=True,
        read_only=True,
        user=f"{SANDBOX_UID}:{SANDBOX_UID}",
        cap_drop=["ALL"],
        security_opt=security_options(work_copy),
        pids_limit=limits.pids,
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        nano_cpus=int(limits.cpus * 1e9),
        ulimits=[
            Ulimit(name="fsize", soft=fsize, hard=fsize),
            Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile),
        ],
        shm_size=f"{limits.tmpfs_mb}m",
        # /work is exec so a tree may run its own scripts; Docker's tmpfs default is noexec.
        tmpfs={"/work": tmpfs_opts + ",exec", "/tmp": tmpfs_opts},
        mounts=mounts,
        # No working_dir: with it, Docker 20.10 mounts the /work tmpfs as root 0755, ignoring mode=.
        environment=env,
        labels=labels,
    )


def _propagation(target: str, tree_propagates: bool) -> str | None:
    # rslave: mounts on the host side reach the container, never the other way.
    return "rslave" if target == "/src" and tree_propagates else None


def batch_labels(run_id: str, property_id: str, first_trial: int, batch_id: str, worker_id: str) -> dict[str, str]:
    """Labels naming the run, batch and the process that owns the container (for every sweep)."""
    return {
        LABEL_RUN: run_id,
        LABEL_PROPERTY: property_id,
        LABEL_TRIAL: str(first_trial),
        LABEL_BATCH: batch_id,
        "probegate.worker": worker_id,
        LABEL_HOST: socket.gethostname(),
        LABEL_PID: str(os.getpid()),
    }


class ReportStream:
    """The supervisor's stdout, attached before start (so nothing is missed), split into JSON lines
    by a reader thread; `next(timeout)` gives a dict, EOF, or None when the timeout passed first.

    Measured on docker 20.10: attach-then-start and logs(stream=True, follow=True) after start both
    deliver each line as it is written; attach is used because it cannot race the start."""

    def __init__(self, container: Container) -> None:
        self._lines: queue.Queue[object] = queue.Queue()
        self._raw = container.attach()
        self._thread = threading.Thread(target=self._read, daemon=True, name="probegate-attach")
        self._thread.start()

    def _read(self) -> None:
        pending = b""
        try:
            for chunk in self._raw:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._lines.put(_parse(line))
        except (SandboxError, OSError, ValueError):
            pass  # a removed container ends the stream abruptly; EOF says the same
        finally:
            self._lines.put(EOF)

    @property
    def ended(self) -> bool:
        """The stream has ended (the reader is done): nothing more will come."""
        return not self._thread.is_alive()

    def next(self, timeout: float) -> object:
        try:
            item = self._lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None
        if item is EOF:  # every later read sees the end at once, not after its whole timeout
            self._lines.put(EOF)
        return item

    def wait_eof(self, deadline: float) -> None:
        """Skip what is left (the supervisor's `done`) until the stream ends or `deadline` passes."""
        while (left := deadline - time.monotonic()) > 0 and self.next(left) is not EOF:
            pass

    def close(self) -> None:
        self._raw.close()


def _parse(line: bytes) -> dict:
    # Only the supervisor writes to the container's stdout; a line that is not its JSON is a fault.
    try:
        value = json.loads(line)
    except ValueError:
        return {"garbled": line[:200].decode(errors="replace")}
    return value if isinstance(value, dict) else {"garbled": line[:200].decode(errors="replace")}


def report_observation(
    spec: TrialSpec, report: dict, *, image_id: str, worker_id: str, work_copy_note: str = ""
) -> Observation:
    """The observation a supervisor's trial report describes; KeyError/TypeError/ValueError if malformed.
    `work_copy_note` says why the host asked for copy mode (the supervisor says why it fell back)."""
    return Observation.of(
        spec,
        image_id=image_id,
        worker_id=worker_id,
        exit_code=report["exit_code"],
        signal=report["signal"],
        timed_out=report["timed_out"],
        oom_killed=report["oom_killed"],
        duration_s=report["duration_s"],
        rusage_user_s=report["rusage_user_s"],
        rusage_sys_s=report["rusage_sys_s"],
        max_rss_kb=report["max_rss_kb"],
        canary_seen=report["canary_seen"],
        stdout=_captured(report["stdout"]),
        stderr=_captured(report["stderr"]),
        writes=tuple(FileChange(path=w["path"], change=w["change"]) for w in report["writes"]),
        work_copy=report.get("work_copy"),
        work_copy_note=report.get("work_copy_note") or work_copy_note,
        interpreter=report.get("interpreter"),
        # The supervisor says the seed the probe ran with (its warm parent's, or the batch's); the spec's
        # is the one it was given in any case.
        hash_seed=report.get("hash_seed") if report.get("hash_seed") is not None else spec.hash_seed,
    )


def _captured(stream: dict) -> Captured:
    return Captured(data=base64.b64decode(stream["data_b64"]), length=stream["length"], sha256=stream["sha256"])
