"""Run images by content, against a real redis-server, a real registry and the real engine: what
the coordinator publishes a worker fetches, verifies and loads; whatever was altered on the way
(a chunk, a manifest, a stream's tags, a registry's answer) is refused and loads nothing usable.

"Another machine" is simulated by removing the image from the one engine after publishing it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import redis
from image_builds import ImageMaker, rewrite_save, saved
from support.servers import RedisServer, RegistryServer

from gate.core.errors import SandboxError
from worker.celery.coordinator.imagepublish import publish_chunks, push_to_registry
from worker.celery.shared.blobs import BLOB_TTL_S, RedisBlobStore
from worker.celery.shared.imagechunks import ImageManifest, pack, pieces
from worker.celery.shared.imagenames import manifest_name, registry_name, registry_repository
from worker.celery.worker.imagefetch import ensure_image
from worker.host.engine import has_image, push_image, tag_image

pytestmark = pytest.mark.integration

SMALL = 1024  # chunk size for the few-KB test images: several chunks each


@pytest.fixture
def images(docker_client: docker.DockerClient) -> Iterator[ImageMaker]:
    maker = ImageMaker(docker_client)
    yield maker
    maker.cleanup()


@pytest.fixture
def store(redis_server: RedisServer) -> RedisBlobStore:
    return RedisBlobStore(redis_server.url)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[RegistryServer]:
    """A private docker-registry on a free loopback port, storing under tmp_path."""
    server = RegistryServer(tmp_path / "registry")
    server.start()
    yield server
    server.stop()


def fetch(client: docker.DockerClient, store: RedisBlobStore, image_id: str, tmp: Path, registry: str | None = None):
    return ensure_image(client, store, image_id, registry=registry, spool=tmp / "spool")


def put_stream(store: RedisBlobStore, image_id: str, stream: bytes) -> str:
    """Publish `stream` as `image_id`'s chunks with a consistent manifest, as any broker writer could."""
    digests = tuple(store.put(pack(piece, "gzip")) for piece in pieces([stream], SMALL))
    manifest = ImageManifest(image_id, len(stream), hashlib.sha256(stream).hexdigest(), digests, "gzip", SMALL)
    digest = store.put(manifest.encode())
    store.name(manifest_name(image_id), digest)
    return digest


def chunk_keys(store: RedisBlobStore, image_id: str) -> list[str]:
    raw = store.get(store.lookup(manifest_name(image_id)) or "")
    assert raw is not None
    return [f"probegate:blob:{d}" for d in ImageManifest.decode(raw, image_id).chunks]


def test_chunks_carry_an_image_to_an_engine_that_lacks_it(docker_client, images, store, tmp_path) -> None:
    """Published in chunks and removed here, the image comes back with its very ID; a second ensure fetches nothing."""
    image = images.scratch()
    publish_chunks(store, docker_client, image, chunk_bytes=SMALL)
    images.drop(image)
    fetched = fetch(docker_client, store, image, tmp_path)
    assert fetched is not None and fetched.via == "chunks" and fetched.size > SMALL
    assert has_image(docker_client, image)
    assert fetch(docker_client, store, image, tmp_path) is None
    assert list((tmp_path / "spool").glob(".stream-*")) == []  # the spooled stream is gone


def test_republishing_skips_the_upload_and_restarts_the_ttls(docker_client, images, store, redis_server) -> None:
    """A second publish of a stored image saves nothing (it works with the image gone) and restarts every TTL."""
    image = images.scratch()
    first = publish_chunks(store, docker_client, image, chunk_bytes=SMALL)
    keys = [*chunk_keys(store, image), f"probegate:blob:{first}", f"probegate:name:{manifest_name(image)}"]
    raw = redis.Redis.from_url(redis_server.url)
    for key in keys:
        raw.expire(key, 100)
    images.drop(image)  # a `docker save` now would fail: only the skip can succeed
    assert publish_chunks(store, docker_client, image, chunk_bytes=SMALL) == first
    assert all(raw.ttl(key) > BLOB_TTL_S - 60 for key in keys)


def test_a_lost_chunk_is_uploaded_again(docker_client, images, store, redis_server, tmp_path) -> None:
    """When one chunk expired, publishing uploads the image again instead of trusting the manifest."""
    image = images.scratch()
    publish_chunks(store, docker_client, image, chunk_bytes=SMALL)
    redis.Redis.from_url(redis_server.url).delete(chunk_keys(store, image)[1])
    publish_chunks(store, docker_client, image, chunk_bytes=SMALL)
    images.drop(image)
    assert fetch(docker_client, store, image, tmp_path) is not None


def test_a_chunk_replaced_under_its_key_is_refused(docker_client, images, store, redis_server, tmp_path) -> None:
    """Other bytes stored under a chunk's digest key fail verification: nothing is loaded."""
    image = images.scratch()
    publish_chunks(store, docker_client, image, chunk_bytes=SMALL)
    images.drop(image)
    redis.Redis.from_url(redis_server.url).set(chunk_keys(store, image)[2], pack(b"\0" * SMALL, "gzip"))
    with pytest.raises(SandboxError, match=r"image chunk 2 \(\w+\) missing from the blob store or failed verification"):
        fetch(docker_client, store, image, tmp_path)
    assert not has_image(docker_client, image)


def test_a_manifest_for_one_image_over_another_images_stream_is_refused(docker_client, images, store, tmp_path) -> None:
    """A manifest naming image X over Y's consistent chunks is refused before the engine loads anything."""
    wanted, other = images.scratch(), images.scratch()
    put_stream(store, wanted, saved(docker_client, other))
    images.drop(wanted)
    images.drop(other)
    with pytest.raises(SandboxError, match=f"holds config .*, not {wanted[:19]}: refused"):
        fetch(docker_client, store, wanted, tmp_path)
    assert not has_image(docker_client, wanted) and not has_image(docker_client, other)


def test_a_stream_that_loads_as_another_image_is_refused_by_the_id_check(docker_client, images, store, tmp_path):
    """Y's stream with its config renamed after X passes the tar check, loads as Y, and is refused."""
    wanted, other = images.scratch(), images.scratch()
    put_stream(store, wanted, rewrite_save(saved(docker_client, other), config_as=wanted))
    images.drop(wanted)
    images.drop(other)
    with pytest.raises(SandboxError, match=r"refused|loading an image"):
        fetch(docker_client, store, wanted, tmp_path)
    assert not has_image(docker_client, wanted)


def test_a_stream_that_would_retag_an_image_is_refused_and_moves_no_tag(docker_client, images, store, tmp_path):
    """A stream naming a tag already in use is refused before load: the tag keeps pointing where it did."""
    victim, image = images.scratch(), images.scratch()
    victim_tag = next(t for t in docker_client.images.get(victim).tags)
    put_stream(store, image, rewrite_save(saved(docker_client, image), repo_tags=[victim_tag]))
    images.drop(image)
    with pytest.raises(SandboxError, match="retag"):
        fetch(docker_client, store, image, tmp_path)
    assert docker_client.images.get(victim_tag).id == victim
    assert not has_image(docker_client, image)


def test_a_registry_carries_an_image_by_digest(docker_client, images, store, registry, tmp_path) -> None:
    """Pushed by the coordinator and removed here, the image is pulled by digest and has its very ID."""
    image = images.scratch()
    reference = push_to_registry(store, docker_client, image, registry.address)
    assert reference.startswith(f"{registry.address}/probegate/project@sha256:")
    images.drop(image)
    fetched = fetch(docker_client, store, image, tmp_path, registry=registry.address)
    assert fetched is not None and fetched.via == "registry"
    assert has_image(docker_client, image)


def test_a_registry_serving_another_image_under_the_tag_is_refused(docker_client, images, store, registry, tmp_path):
    """Another image pushed under the run's tag, its digest published: the pull's ID check refuses it."""
    wanted, other = images.scratch(), images.scratch()
    push_to_registry(store, docker_client, wanted, registry.address)
    repository, tag = registry_repository(registry.address), wanted.removeprefix("sha256:")[:16]
    tag_image(docker_client, other, repository, tag)
    store.name(registry_name(wanted), push_image(docker_client, repository, tag).removeprefix("sha256:"))
    images.drop(wanted)
    images.drop(other)
    with pytest.raises(SandboxError, match=f"is image {other[:19]}, not {wanted[:19]}: refused"):
        fetch(docker_client, store, wanted, tmp_path, registry=registry.address)
    assert not has_image(docker_client, wanted)


@pytest.mark.parametrize("name", ["probegate/sandbox-python:trixie-1", "short", "sha256:abc"])
def test_an_image_named_by_tag_or_prefix_is_refused(docker_client, store, sandbox_image, tmp_path, name) -> None:
    """Only a full sha256 ID counts: a tag or a short prefix the engine would resolve is refused."""
    name = sandbox_image[:19] if name == "short" else name
    with pytest.raises(SandboxError, match="not an image ID"):
        fetch(docker_client, store, name, tmp_path)


def test_an_unpublished_image_is_refused_with_one_line(docker_client, store, tmp_path) -> None:
    """An image neither here nor published is refused, and one pushed to a registry needs --registry."""
    missing = "sha256:" + "0" * 64
    with pytest.raises(SandboxError) as caught:
        fetch(docker_client, store, missing, tmp_path)
    assert str(caught.value) == "image sha256:000000000000 is not on this engine and was not published"
    store.name(registry_name(missing), "1" * 64)
    with pytest.raises(SandboxError, match="was pushed to a registry, and this worker has no --registry"):
        fetch(docker_client, store, missing, tmp_path)


def test_the_sandbox_runs_a_trial_in_the_specs_image(sandbox, make_trial, images, sandbox_image) -> None:
    """A spec naming a derived image runs in it, not in the sandbox's own image, and its observation says so."""
    derived = images.derived(sandbox_image, "baked into the derived image\n")
    spec, inputs = make_trial("print(open('/derived.txt').read(), end='')\n")
    [obs] = sandbox.run_batch([spec.model_copy(update={"image_id": derived})], inputs)
    assert obs.fault is None, obs.fault
    assert obs.stdout.data == b"baked into the derived image\n" and obs.image_id == derived
