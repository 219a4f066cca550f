"""Executors: the one seam between where trials run and what they mean.

`Executor.run(specs, inputs)` yields one Observation per spec, in completion order; `open` and
`close` bracket a whole run, so its sandboxes stay warm from wave to wave. The local pool (default,
no broker) runs batches on threads, each calling a `Sandbox`; a Celery executor implements the
same methods. `MockSandbox`, like httpx's MockTransport, answers trials from a
function so everything above the sandbox can be tested without Docker.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from types import TracebackType
from typing import Protocol

from gate.card import HarnessEvent
from gate.errors import SandboxError
from gate.fixtures import seal_tree, tree_files
from gate.trial import Inputs, Limits, Observation, Sandbox, TrialSpec

SKIP_IN_TREE = frozenset({".git"})
MAX_LOCAL_BATCH = 50  # a crashed supervisor costs at most this many trials' container


class Executor(Protocol):
    image: str  # the sandbox image tag trials are routed to
    events: list[HarnessEvent]  # redeliveries, lost batches, broker outages seen during `run`

    def image_id(self) -> str:
        """The image ID when known before any trial runs (local engine); "" when only workers know."""
        ...

    def open(self, run_id: str, limits: Limits) -> None:
        """A run begins: its sandboxes stay warm across `run` calls (waves) until `close`, and may
        start containers of `limits` while the coordinator is still sealing and planning."""
        ...

    def run(self, specs: Sequence[TrialSpec], inputs: LocalInputs) -> Iterator[Observation]:
        """Run every spec; yield each observation as it arrives (order is not guaranteed)."""
        ...

    def close(self, run_id: str) -> None:
        """The run is over, however it ended: nothing kept for it may remain anywhere."""
        ...


class LocalInputs:
    """A snapshot of the patched tree (digested as copied) and the sealed fixture bytes by digest.

    Trials run from the snapshot, so an edit to the work tree during a run cannot reach them.
    """

    def __init__(self, workdir: Path, fixtures: Mapping[str, bytes]) -> None:
        tree_files(workdir, skip_dirs=SKIP_IN_TREE)  # refuses symlinks and specials, naming the workdir
        self._tmp = Path(tempfile.mkdtemp(prefix="probegate-tree-"))
        self.snapshot = self._tmp / "tree"
        shutil.copytree(workdir, self.snapshot, ignore=shutil.ignore_patterns(*SKIP_IN_TREE))
        world_readable(self._tmp)
        self.tree_digest = seal_tree(self.snapshot).digest
        self.fixtures: dict[str, bytes] = dict(fixtures)

    def tree_dir(self, digest: str) -> Path:
        if digest != self.tree_digest:
            raise SandboxError(f"no tree with digest {digest[:16]} (have {self.tree_digest[:16]})")
        return self.snapshot

    def fixture_bytes(self, digest: str) -> bytes:
        try:
            return self.fixtures[digest]
        except KeyError:
            raise SandboxError(f"no fixture blob with digest {digest[:16]}") from None

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> LocalInputs:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def world_readable(root: Path) -> None:
    """The sandbox runs as an unprivileged user: make the snapshot readable whatever the umask."""
    for dirpath, _, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            os.chmod(path, 0o644 | (os.stat(path).st_mode & 0o111))


def batches(specs: Sequence[TrialSpec], size: int) -> list[list[TrialSpec]]:
    """Specs grouped by property (same tree, same fixture), in chunks of at most `size`."""
    groups: dict[str, list[TrialSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.property_id, []).append(spec)
    return [items[i : i + size] for items in groups.values() for i in range(0, len(items), size)]


class LocalExecutor:
    """Runs batches on a thread pool sized to the machine; each thread drives one sandbox call."""

    def __init__(self, sandbox: Sandbox, *, jobs: int | None = None, batch_size: int | None = None) -> None:
        self.sandbox = sandbox
        self.jobs = jobs or os.cpu_count() or 2
        self.batch_size = batch_size
        self.image: str = getattr(sandbox, "image", "")
        self.events: list[HarnessEvent] = []
        self._open: set[str] = set()

    def image_id(self) -> str:
        return self.sandbox.image_id()

    def open(self, run_id: str, limits: Limits) -> None:
        self.sandbox.open(run_id)
        self.sandbox.prestart(run_id, limits, self.jobs)  # one container per job, started while the gate plans
        self._open.add(run_id)

    def close(self, run_id: str) -> None:
        self._open.discard(run_id)
        self.sandbox.close(run_id)

    def run(self, specs: Sequence[TrialSpec], inputs: Inputs) -> Iterator[Observation]:
        run_ids = {spec.run_id for spec in specs}
        # A run not opened by the caller is scoped to this call: its containers go when it returns.
        scoped = run_ids - self._open
        for run_id in scoped:
            self.sandbox.open(run_id)
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="trial")
        futures: dict[Future[list[Observation]], list[TrialSpec]] = {
            pool.submit(self.sandbox.run_batch, batch, inputs): batch for batch in self._batches(specs)
        }
        try:
            for future in as_completed(futures):
                batch = futures[future]
                try:
                    observed = future.result()
                except Exception as exc:
                    # A sandbox that raises instead of reporting is itself a harness fault.
                    observed = [
                        Observation.harness_fault(s, f"sandbox raised {type(exc).__name__}: {exc}") for s in batch
                    ]
                yield from observed
        except BaseException:
            # Ctrl-C or an abandoned generator: in-flight trials live in pool threads, so end
            # them by removing their containers instead of waiting out their deadlines.
            for run_id in run_ids:
                self.sandbox.abort(run_id)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for run_id in scoped:
                self.sandbox.close(run_id)

    def _batches(self, specs: Sequence[TrialSpec]) -> list[list[TrialSpec]]:
        """Each property's trials split evenly over the pool: batches are as large as they can be
        while every job still gets one (a warm container spares all but a thread's first start)."""
        if self.batch_size:
            return batches(specs, self.batch_size)
        counts: dict[str, int] = {}
        for spec in specs:
            counts[spec.property_id] = counts.get(spec.property_id, 0) + 1
        size = max(1, min(MAX_LOCAL_BATCH, math.ceil(max(counts.values(), default=1) / self.jobs)))
        return batches(specs, size)


class MockSandbox:
    """A Sandbox that answers each trial with `handler(spec, fixture_bytes)`; no container runs."""

    def __init__(self, handler: Callable[[TrialSpec, bytes], Observation], image: str = "sha256:mock") -> None:
        self.handler = handler
        self.image = image

    def image_id(self) -> str:
        return self.image

    def run_batch(self, specs: list[TrialSpec], inputs: Inputs) -> list[Observation]:
        return [self.handler(spec, inputs.fixture_bytes(spec.fixture_digest)) for spec in specs]

    def open(self, run_id: str) -> None:
        return None

    def prestart(self, run_id: str, limits: Limits, count: int) -> None:
        return None

    def close(self, run_id: str) -> int:
        return 0

    def abort(self, run_id: str) -> int:
        return 0
