"""Run images travel to workers by content: the coordinator's side. It publishes the run's image
once per run, in the background from the moment the run opens, so batches never wait for it: a
worker that already holds the image runs them at once, and one that lacks it waits for the
publication (the batch says so) and then fetches it (worker.celery.worker.imagefetch).

With a registry configured the image is pushed as `<registry>/probegate/project:<id prefix>` and
its manifest digest named in the blob store; otherwise its `docker save` stream goes into the blob
store in chunks. Both are skipped when what was published before is still there (only TTLs
restart). A failure is recorded for the run's workers, which then refuse instead of waiting.
"""

from __future__ import annotations

import collections
import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import docker

from gate.core.card.card import HarnessEvent
from gate.core.errors import GateError, SandboxError
from worker.celery.shared.blobs import BlobStore, RedisBlobStore
from worker.celery.shared.broker import broker_call
from worker.celery.shared.imagechunks import CHUNK_BYTES, ImageManifest, pack, pieces
from worker.celery.shared.imagenames import failure_name, manifest_name, registry_name, registry_repository
from worker.host.engine import (
    DEFAULT_IMAGE,
    docker_client,
    push_image,
    registry_serves,
    resolve_image_id,
    save_image,
    tag_image,
)

PACK_THREADS = 2  # zlib and Redis release the GIL: packing one chunk overlaps storing the last
# RedisBlobStore's key for a blob (worker/celery/shared/blobs.py): restarting a chunk's TTL needs no upload.
_BLOB_KEY = "probegate:blob:{}"


def publish(
    store: BlobStore, client: docker.DockerClient, image_id: str, *, registry: str | None = None, compress: bool = True
) -> str:
    """Make `image_id` (on this machine's engine) fetchable by workers; returns where it went."""
    if registry:
        return push_to_registry(store, client, image_id, registry)
    return f"blob store, manifest {publish_chunks(store, client, image_id, compress=compress)[:16]}"


def push_to_registry(store: BlobStore, client: docker.DockerClient, image_id: str, registry: str) -> str:
    """Push the image and name its manifest digest in the store, unless the digest named there is
    still served; returns the reference workers pull (by digest, never by the movable tag)."""
    repository = registry_repository(registry)
    known = store.lookup(registry_name(image_id))
    if known is not None and registry_serves(client, f"{repository}@sha256:{known}"):
        store.name(registry_name(image_id), known)  # restarts the name's TTL
        return f"{repository}@sha256:{known}"
    tag = image_id.removeprefix("sha256:")[:16]
    tag_image(client, image_id, repository, tag)
    digest = push_image(client, repository, tag)
    store.name(registry_name(image_id), digest.removeprefix("sha256:"))
    return f"{repository}@{digest}"


def publish_chunks(
    store: BlobStore,
    client: docker.DockerClient,
    image_id: str,
    *,
    compress: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
) -> str:
    """Put the image's save stream into the store in chunks, unless its manifest and every chunk are
    still there (then only their TTLs restart); returns the manifest's digest."""
    name = manifest_name(image_id)
    known = store.lookup(name)
    if known is not None and _still_stored(store, known, image_id):
        store.name(name, known)  # restarts the name's TTL too
        return known
    encoding = "gzip" if compress else "identity"
    total, size, digests = hashlib.sha256(), 0, []
    in_flight: collections.deque[Future[str]] = collections.deque()
    with ThreadPoolExecutor(max_workers=PACK_THREADS, thread_name_prefix="probegate-pack") as pool:
        for piece in pieces(save_image(client, image_id, chunk_bytes), chunk_bytes):
            total.update(piece)
            size += len(piece)
            in_flight.append(pool.submit(lambda p: store.put(pack(p, encoding)), piece))
            if len(in_flight) > PACK_THREADS:  # bounds memory to a few chunks, not the image
                digests.append(in_flight.popleft().result())
        digests += [future.result() for future in in_flight]
    if size == 0:
        raise SandboxError(f"saving image {image_id[:19]} gave an empty stream")
    manifest = ImageManifest(image_id, size, total.hexdigest(), tuple(digests), encoding, chunk_bytes)
    digest = store.put(manifest.encode())
    store.name(name, digest)
    return digest


def _still_stored(store: BlobStore, manifest_digest: str, image_id: str) -> bool:
    """Whether a published manifest and all its chunks are still stored, their TTLs restarted."""
    raw = store.get(manifest_digest)
    if raw is None:
        return False
    try:
        manifest = ImageManifest.decode(raw, image_id)
    except SandboxError:
        return False  # someone else's bytes under our name: publish afresh
    store.put(raw)  # an existing blob's put only restarts its TTL
    if not isinstance(store, RedisBlobStore):
        return False  # no way to restart a chunk's TTL without its bytes: upload (puts are idempotent)
    with broker_call("refreshing image chunks"), store.client.pipeline(transaction=False) as pipe:
        for digest in manifest.chunks:
            pipe.expire(_BLOB_KEY.format(digest), store.ttl_s)
        return all(pipe.execute())


class Publication:
    """One run's image being published on a daemon thread; `failure` is "" until it failed. A
    failure is also recorded in the store for the run's workers (best effort: a store that cannot
    take it cannot serve the image either, and waiting workers then give up after their wait)."""

    def __init__(self, publish_image: Callable[[], str], store: BlobStore, run_id: str, image_id: str) -> None:
        self.run_id, self.image_id = run_id, image_id
        self.where = ""
        self.failure = ""
        self._publish = publish_image
        self._store = store
        self._done = threading.Event()
        threading.Thread(target=self._run, name="probegate-publish", daemon=True).start()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)

    def _run(self) -> None:
        try:
            self.where = self._publish()
        except Exception as exc:  # a bug too must reach the workers as a refusal, not as their timeout
            self.failure = str(exc) if isinstance(exc, GateError) else f"{type(exc).__name__}: {exc}"
            self.failure = self.failure.splitlines()[0][:300] if self.failure else type(exc).__name__
            try:
                reason = self._store.put(self.failure.encode())
                self._store.name(failure_name(self.run_id, self.image_id), reason)
            except GateError:
                pass
        finally:
            self._done.set()


class RunImages:
    """The coordinator's run images: its tag resolved once on this machine's engine (where the
    project image was built), and each run's publication of it started once, on a thread."""

    def __init__(
        self,
        image: str,
        store: BlobStore,
        events: list[HarnessEvent],
        *,
        registry: str | None,
        compress: bool,
        wait_s: float,
    ) -> None:
        if registry:
            registry_repository(registry)  # a malformed one is a usage error before anything runs
        self.image, self.store, self.events = image, store, events
        self.registry, self.compress, self.wait_s = registry or None, compress, wait_s
        self._image_id: str | None = None
        self._engine: docker.DockerClient | None = None
        self._publications: dict[tuple[str, str], Publication] = {}  # by (run, image ID)
        self._noted: set[tuple[str, str]] = set()

    def image_id(self) -> str:
        """The tag's image ID here; every batch names it and a worker that lacks it fetches it. Only
        the bundled image may be missing here (or the engine): then "", each worker runs its own
        build of it, the card takes the ID the trials report, and an event says so."""
        if self._image_id is None:
            try:
                self._image_id = resolve_image_id(self._local_engine(), self.image)
            except SandboxError as exc:
                if self.image != DEFAULT_IMAGE:
                    raise
                self._image_id = ""
                detail = f"{self.image} not resolved here ({exc}); each worker runs its own build of it"
                self.events.append(HarnessEvent(kind="image_unpublished", detail=detail[:300]))
        return self._image_id

    def start(self, run_id: str, image_id: str) -> Publication:
        """The run's publication of `image_id`, started on first need."""
        key = (run_id, image_id)
        if key not in self._publications:

            def publish_image() -> str:
                engine = self._local_engine()
                return publish(self.store, engine, image_id, registry=self.registry, compress=self.compress)

            self._publications[key] = Publication(publish_image, self.store, run_id, image_id)
        return self._publications[key]

    def republish(self, run_id: str, image_id: str) -> Publication:
        """Publish the run's image again (the broker restarted empty: what was published is gone); a
        publication still in flight is left to finish first, as its chunks may be lost with the old store."""
        old = self._publications.pop((run_id, image_id), None)
        if old is not None:
            old.wait(self.wait_s)
        return self.start(run_id, image_id)

    def wait_hint(self, run_id: str, image_id: str) -> dict[str, float]:
        """The batch's task options: a worker lacking the image waits for a publication still in
        flight (up to `wait_s`), never for one that ended or was never started."""
        publication = self._publications.get((run_id, image_id))
        return {"image_wait_s": self.wait_s} if publication is not None and not publication.done else {}

    def note_failures(self) -> None:
        """An `image_publish_failed` event, once, for each publication that failed so far."""
        for key, publication in self._publications.items():
            if publication.failure and key not in self._noted:
                self._noted.add(key)
                detail = f"{publication.image_id} could not be published: {publication.failure}"
                self.events.append(HarnessEvent(kind="image_publish_failed", detail=detail[:300]))

    def finish(self, run_id: str) -> None:
        """The run is over: let its publications finish (at most `wait_s`; they serve later runs too)."""
        for key in [key for key in self._publications if key[0] == run_id]:
            self._publications.pop(key).wait(self.wait_s)

    def _local_engine(self) -> docker.DockerClient:
        if self._engine is None:
            self._engine = docker_client()
        return self._engine
