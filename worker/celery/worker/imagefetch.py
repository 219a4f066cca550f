"""Run images travel to workers by content, so any worker can serve any run's image: the worker's
side. A batch names its run's image by ID; a worker whose engine lacks it fetches it from where
the coordinator published it (worker.celery.coordinator.imagepublish): pulled by manifest digest from the
worker's own `--registry`, or rebuilt from the blob store's chunks (verified one by one and as a
whole, and checked to add one untagged image). Either way the engine must then hold the very ID
the spec names. Docker's own image store is the cache. What each is called on the broker and in
the registry: worker.celery.shared.imagenames.

Whatever fails (unpublished, missing, altered, another image) is a SandboxError or BrokerError
with a one-line reason, which the caller turns into harness faults: never a run in another image.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import hashlib
import re
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import docker

from gate.core.errors import SandboxError
from worker.celery.shared.blobs import BlobStore
from worker.celery.shared.imagechunks import CHUNK_BYTES, ImageManifest, check_save_stream
from worker.celery.shared.imagenames import failure_name, manifest_name, registry_name, registry_repository
from worker.host.engine import has_image, load_image, pull_image

POLL_S = 0.5  # how often a worker waiting for a publication in flight looks again
FETCH_THREADS = 2  # chunks fetched and unpacked ahead of the one being written (bounds memory too)
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Fetched:
    """How a worker came to hold an image it lacked."""

    image_id: str
    via: str  # "registry" or "chunks"
    seconds: float
    size: int  # bytes of the save stream (chunks), 0 when pulled


def ensure_image(
    client: docker.DockerClient,
    store: BlobStore,
    image_id: str,
    *,
    registry: str | None,
    spool: Path,
    run_id: str = "",
    wait_s: float = 0.0,
) -> Fetched | None:
    """Make `image_id` present on this engine: None when it already was, else how it was fetched.
    `wait_s`: the coordinator was still publishing it when it sent the batch, so wait up to that
    long for the publication (or for its failure, recorded under `run_id`). Processes of one host
    fetch an image one at a time (a lock file in `spool`, which also holds the stream being verified)."""
    if has_image(client, image_id):
        return None
    spool.mkdir(parents=True, exist_ok=True)
    with _host_lock(spool / f"{image_id.removeprefix('sha256:')}.lock"):
        started = time.monotonic()
        while not has_image(client, image_id):  # else another process of this host fetched it meanwhile
            pushed = store.lookup(registry_name(image_id))
            chunked = store.lookup(manifest_name(image_id))
            if pushed is not None and registry:
                _pull(client, registry, pushed, image_id)
                return Fetched(image_id, "registry", time.monotonic() - started, 0)
            if chunked is not None:
                size = _load_chunks(client, store, chunked, image_id, spool)
                return Fetched(image_id, "chunks", time.monotonic() - started, size)
            if pushed is not None:
                raise SandboxError(f"image {image_id[:19]} was pushed to a registry, and this worker has no --registry")
            failed = store.lookup(failure_name(run_id, image_id)) if run_id else None
            if failed is not None:
                why = (store.get(failed) or b"(reason lost)").decode(errors="replace").splitlines() or [""]
                raise SandboxError(f"the coordinator could not publish image {image_id[:19]}: {why[0][:300]}")
            if time.monotonic() - started >= wait_s:
                raise SandboxError(f"image {image_id[:19]} is not on this engine and was not published")
            time.sleep(POLL_S)
    return None


def _pull(client: docker.DockerClient, registry: str, digest: str, image_id: str) -> None:
    if not _HEX64.fullmatch(digest):
        raise SandboxError(f"the published registry digest for {image_id[:19]} is malformed")
    repository = registry_repository(registry)
    got = pull_image(client, repository, f"sha256:{digest}")
    if got != image_id:
        raise SandboxError(f"{repository}@sha256:{digest[:12]} is image {got[:19]}, not {image_id[:19]}: refused")


def _load_chunks(
    client: docker.DockerClient, store: BlobStore, manifest_digest: str, image_id: str, spool: Path
) -> int:
    raw = store.get(manifest_digest)
    if raw is None:
        raise SandboxError(f"image manifest {manifest_digest[:16]} missing from the blob store or failed verification")
    manifest = ImageManifest.decode(raw, image_id)

    def piece(index: int, digest: str) -> bytes:
        blob = store.get(digest)  # only bytes that hash to `digest`, or None
        if blob is None:
            why = "missing from the blob store or failed verification"
            raise SandboxError(f"image chunk {index} ({digest[:16]}) {why}")
        return manifest.unpack(index, blob)

    with tempfile.TemporaryFile(dir=spool, prefix=".stream-") as stream:
        total = hashlib.sha256()
        # Fetching and unpacking the next chunks (Redis and zlib release the GIL) overlaps writing this one.
        with ThreadPoolExecutor(max_workers=FETCH_THREADS, thread_name_prefix="probegate-fetch") as pool:
            ahead: collections.deque[Future[bytes]] = collections.deque()
            for index, digest in enumerate(manifest.chunks):
                ahead.append(pool.submit(piece, index, digest))
                last = index == len(manifest.chunks) - 1
                while ahead and (len(ahead) > FETCH_THREADS or last):
                    data = ahead.popleft().result()
                    total.update(data)
                    stream.write(data)
        if total.hexdigest() != manifest.sha256:
            raise SandboxError(
                f"image stream hashes to {total.hexdigest()[:16]}, its manifest says {manifest.sha256[:16]}"
            )
        stream.seek(0)
        check_save_stream(stream, image_id)
        stream.seek(0)
        loaded = load_image(client, iter(lambda: stream.read(CHUNK_BYTES), b""))
    if loaded != [image_id] or not has_image(client, image_id):
        raise SandboxError(
            f"the image stream loaded as {', '.join(loaded)[:60] or 'nothing'}, not {image_id[:19]}: refused"
        )
    return manifest.size


@contextlib.contextmanager
def _host_lock(path: Path) -> Iterator[None]:
    # flock: released by the kernel when a holder dies, so a killed worker never wedges the others.
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
