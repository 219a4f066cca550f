"""Run images through Celery: real redis-server, real registry, real `gate-worker serve` processes,
real Docker. Batches go to the shared queue and name the run's image by ID; a worker started for
the base image fetches a derived one it lacks, verifies it and runs the trials in it, and refuses
(as harness faults, never a run) an image that fails verification.

The coordinator and the workers share one engine here, so "a worker on another machine" is
simulated by publishing the image as the coordinator would and then removing it from the engine.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from image_builds import ImageMaker
from support.servers import RedisServer, RegistryServer, Workers

from gate.core.errors import SandboxError
from gate.core.suite.trial import FaultOrigin, Observation, TrialSpec
from gate.core.testing import make_specs
from gate.io.snapshot import LocalInputs
from worker.celery.coordinator import imagepublish
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.blobs import RedisBlobStore
from worker.celery.shared.imagechunks import ImageManifest
from worker.celery.shared.imagenames import manifest_name
from worker.host.engine import has_image

pytestmark = pytest.mark.integration

PROBE = "print(open('/derived.txt').read(), end='')\n"


@pytest.fixture
def images(docker_client) -> Iterator[ImageMaker]:
    maker = ImageMaker(docker_client)
    yield maker
    maker.cleanup()


@pytest.fixture
def derived(images: ImageMaker, sandbox_image: str) -> tuple[str, str]:
    """A project image: the sandbox image plus /derived.txt with unique text; (image ID, text)."""
    text = f"only in the derived image {uuid.uuid4().hex}\n"
    return images.derived(sandbox_image, text), text


@pytest.fixture
def inputs(tmp_path: Path) -> Iterator[LocalInputs]:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "probe.py").write_text(PROBE)
    fixture = b"{}"
    with LocalInputs(tmp_path / "tree", {hashlib.sha256(fixture).hexdigest(): fixture}) as local:
        yield local


@pytest.fixture
def store(redis_server: RedisServer) -> RedisBlobStore:
    return RedisBlobStore(redis_server.url)


@pytest.fixture
def elsewhere(images: ImageMaker, store: RedisBlobStore, docker_client) -> Callable[..., str]:
    """Publish an image as the coordinator would (chunks, or to `registry`), then remove it from the
    engine: the worker is now "another machine" that never had it. The coordinator's own publish in
    the run then finds it published and skips (it needs no image for that)."""

    def publish_elsewhere(image_id: str, registry: str | None = None) -> str:
        where = imagepublish.publish(store, docker_client, image_id, registry=registry)
        images.drop(image_id)
        return where

    return publish_elsewhere


def specs(inputs: LocalInputs, image_id: str, n: int = 3) -> list[TrialSpec]:
    """`n` trials of a fresh run, each naming `image_id`."""
    [fixture_digest] = inputs.fixtures
    return make_specs(
        n,
        run_id=f"test-{uuid.uuid4().hex[:12]}",
        property_id="image",
        tree_digest=inputs.tree_digest,
        fixture_digest=fixture_digest,
        deadline_s=10.0,
        image_id=image_id,
    )


def run(executor: CeleryExecutor, plan: list[TrialSpec], inputs: LocalInputs) -> list[Observation]:
    try:
        seen = list(executor.run(plan, inputs))
    finally:
        executor.close(plan[0].run_id)
    assert len(seen) == len(plan)
    return seen


def fetches(executor: CeleryExecutor) -> list[str]:
    return [e.detail for e in executor.events if e.kind == "image_fetched"]


Ready = Callable[..., None]


@pytest.fixture
def base_worker(images: ImageMaker, workers: Workers) -> Ready:
    """Start one worker for the base image (no --image), with any extra flags, and wait for it.
    (After `images`: the workers stop, and their containers go, before the test's images are removed.)"""

    def start(*extra: str) -> None:
        # A first batch also fetches the image (seconds): no redelivery meanwhile, unlike the default 8 s.
        workers.env["PROBEGATE_VISIBILITY_TIMEOUT"] = "120"
        workers.start("w1", *extra)
        workers.wait_ready()

    return start


def test_a_base_image_worker_fetches_a_derived_image_once_and_reuses_it(
    base_worker, redis_server: RedisServer, derived, inputs, elsewhere, docker_client
) -> None:
    """The worker lacks the run's derived image, fetches it from chunks once for the run's three batches, and the
    probe reads the file baked into it; the next run of it finds it in the engine and fetches nothing."""
    image_id, text = derived
    elsewhere(image_id)
    base_worker()
    first = CeleryExecutor(redis_server.url, worker_wait_s=30, batch_size=1)
    seen = run(first, specs(inputs, image_id), inputs)
    assert all(o.fault is None and o.exit_code == 0 for o in seen), seen
    assert {o.stdout.data.decode() for o in seen} == {text}
    assert {o.image_id for o in seen} == {image_id}
    [fetched] = fetches(first)  # three batches on one worker process, one fetch
    assert "via chunks" in fetched
    assert has_image(docker_client, image_id)
    second = CeleryExecutor(redis_server.url, worker_wait_s=30, batch_size=1)
    seen = run(second, specs(inputs, image_id), inputs)
    assert all(o.fault is None and o.stdout.data.decode() == text for o in seen), seen
    assert fetches(second) == []


def waiting_for(workers: Workers, name: str, image_id: str, timeout: float = 60) -> None:
    """Wait until worker `name` waits for `image_id` to be published: it holds the image's fetch lock
    (worker.celery.worker.imagefetch.ensure_image), taken once it found the image missing from its engine."""
    lock = workers.tmp / f"cache-{name}" / "images" / f"{image_id.removeprefix('sha256:')}.lock"
    give_up = time.monotonic() + timeout
    while not lock.exists():
        assert time.monotonic() < give_up, f"worker {name} never began waiting for image {image_id[:19]} ({lock})"
        time.sleep(0.05)


def test_a_worker_lacking_the_image_waits_for_a_publication_in_flight(
    base_worker, workers: Workers, redis_server: RedisServer, derived, inputs, elsewhere, store, monkeypatch
) -> None:
    """Batches go out while the coordinator still publishes; the worker that lacks the image waits, then runs it."""
    image_id, text = derived
    elsewhere(image_id)
    digest = store.lookup(manifest_name(image_id))
    redis.Redis.from_url(redis_server.url).delete(f"probegate:name:{manifest_name(image_id)}")  # not yet

    def slow_publish(store_, client, image_id_: str, **_: object) -> str:
        waiting_for(workers, "w1", image_id_)  # the publication ends only once the worker waits for it
        store_.name(manifest_name(image_id_), digest)
        return "blob store, after a while"

    monkeypatch.setattr(imagepublish, "publish", slow_publish)
    base_worker()
    executor = CeleryExecutor(redis_server.url, worker_wait_s=30)
    seen = run(executor, specs(inputs, image_id), inputs)
    assert all(o.fault is None and o.stdout.data.decode() == text for o in seen), seen
    assert len(fetches(executor)) == 1


def test_a_failed_publication_is_refused_by_the_waiting_worker(
    base_worker, workers: Workers, redis_server: RedisServer, derived, inputs, images, monkeypatch
) -> None:
    """When the coordinator cannot publish, a worker lacking the image refuses at once with the reason."""
    image_id, _ = derived
    images.drop(image_id)

    def failing_publish(store_, client, image_id_: str, **_: object) -> str:
        waiting_for(workers, "w1", image_id_)  # it fails while the worker waits for it
        raise SandboxError("saving image: the engine went away (test)")

    monkeypatch.setattr(imagepublish, "publish", failing_publish)
    base_worker()
    executor = CeleryExecutor(redis_server.url, worker_wait_s=30)
    seen = run(executor, specs(inputs, image_id), inputs)
    why = f"run image unavailable: the coordinator could not publish image {image_id[:19]}: saving image: the engine"
    assert all(o.fault_origin == FaultOrigin.HARNESS and (o.fault or "").startswith(why) for o in seen), seen
    assert [e.kind for e in executor.events] == ["image_publish_failed"]


def test_a_replaced_chunk_makes_every_trial_a_harness_fault(
    base_worker, redis_server: RedisServer, derived, inputs, elsewhere, store, docker_client
) -> None:
    """A chunk replaced in Redis under its key is refused on the worker: each trial a harness fault, none run."""
    image_id, _ = derived
    executor = CeleryExecutor(redis_server.url, worker_wait_s=30, blobs=store)
    elsewhere(image_id)
    manifest = ImageManifest.decode(store.get(store.lookup(manifest_name(image_id)) or "") or b"", image_id)
    redis.Redis.from_url(redis_server.url).set(f"probegate:blob:{manifest.chunks[3]}", b"other bytes")
    base_worker()
    seen = run(executor, specs(inputs, image_id), inputs)
    assert all(o.fault_origin == FaultOrigin.HARNESS and o.exit_code is None for o in seen), seen
    assert all(o.fault.startswith("run image unavailable: image chunk 3 ") for o in seen if o.fault)
    assert all("failed verification" in (o.fault or "") and "\n" not in (o.fault or "") for o in seen)
    assert not has_image(docker_client, image_id)


def test_a_registry_carries_the_run_image_to_a_worker(
    base_worker, redis_server: RedisServer, registry: RegistryServer, derived, inputs, elsewhere
) -> None:
    """With --registry on both sides the image goes by the registry: the worker pulls it by digest and runs in it."""
    image_id, text = derived
    elsewhere(image_id, registry.address)
    base_worker("--registry", registry.address)
    executor = CeleryExecutor(redis_server.url, worker_wait_s=30, registry=registry.address)
    seen = run(executor, specs(inputs, image_id), inputs)
    assert all(o.fault is None and o.stdout.data.decode() == text and o.image_id == image_id for o in seen), seen
    [fetched] = fetches(executor)
    assert "via registry" in fetched


def test_a_pinned_fleet_takes_only_batches_sent_to_its_queue(base_worker, redis_server: RedisServer) -> None:
    """A worker started with --queue is found by a coordinator pinned to that queue, not through the shared queue."""
    base_worker("--queue", "probegate.pinned")
    assert CeleryExecutor(redis_server.url, worker_wait_s=1).discover() == 0
    assert CeleryExecutor(redis_server.url, queue="probegate.pinned", worker_wait_s=10).discover() >= 1


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[RegistryServer]:
    server = RegistryServer(tmp_path / "registry")
    server.start()
    yield server
    server.stop()
