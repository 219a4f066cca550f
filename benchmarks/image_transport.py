"""Moving a run image to a worker that lacks it: publish on the coordinator, then fetch, verify and
load on the worker, through the blob store's chunks (gzip'd and plain) and through a registry.
Each is printed beside a baseline measured in the same run: `docker save` to a file and
`docker load` of it on the same engine (what a shared disk would cost).

    .venv/bin/python -m benchmarks.image_transport [--image TAG] [--repeat 1]

The image moved is a copy of --image (default: the sandbox image) with its own layer (`docker
export` of a container, then `docker import`), so every load and pull is a real one: the shared
image itself is never removed. Starts a private redis-server and, per round, an empty
docker-registry on free 127.0.0.1 ports; removes the copy and stops them at the end. One engine plays coordinator and
worker: the copy is removed from it between publishing and fetching.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker
import redis

from tests.support.servers import RedisServer, RegistryServer
from worker.celery.coordinator.imagepublish import publish_chunks, push_to_registry
from worker.celery.shared.blobs import RedisBlobStore
from worker.celery.worker.imagefetch import ensure_image
from worker.host.engine import DEFAULT_IMAGE, docker_client, load_image, save_image


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def copy_of(client: docker.DockerClient, tag: str, tmp: Path) -> str:
    """A new image with the same files as `tag` but a layer of its own (absent from the engine)."""
    container = client.containers.create(tag, command=["true"], network_mode="none")
    try:
        with (tmp / "rootfs.tar").open("wb") as out:
            for chunk in container.export():
                out.write(chunk)
    finally:
        container.remove(force=True)
    name = f"probegate/bench-transport:{int(time.time())}"
    client.api.import_image_from_file(str(tmp / "rootfs.tar"), repository=name.split(":")[0], tag=name.split(":")[1])
    (tmp / "rootfs.tar").unlink()
    return client.images.get(name).id


def drop(client: docker.DockerClient, image_id: str) -> None:
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(image_id, force=True)


def measure(client: docker.DockerClient, image_id: str, tmp: Path, url: str, registry: str) -> dict[str, float]:
    """One round of every way, against an empty Redis and an empty registry; the image is present
    on entry and on exit."""
    got: dict[str, float] = {}
    stream = tmp / "save.tar"

    def save() -> None:
        with stream.open("wb") as out:
            for piece in save_image(client, image_id, 8 << 20):
                out.write(piece)

    def load() -> None:
        with stream.open("rb") as handle:
            load_image(client, iter(lambda: handle.read(8 << 20), b""))

    got["save to a file"] = timed(save)
    got["size MB"] = stream.stat().st_size / 1e6
    drop(client, image_id)
    got["load from the file"] = timed(load)
    stream.unlink()
    got["baseline: save + load"] = got["save to a file"] + got["load from the file"]

    store = RedisBlobStore(url)
    for label, compress in (("gzip", True), ("plain", False)):
        redis.Redis.from_url(url).flushdb()
        got[f"chunks {label}: publish"] = timed(lambda c=compress: publish_chunks(store, client, image_id, compress=c))
        got[f"chunks {label}: republish (skipped)"] = timed(lambda: publish_chunks(store, client, image_id))
        used = redis.Redis.from_url(url).info("memory")["used_memory"] / 1e6
        got[f"chunks {label}: Redis MB"] = used
        drop(client, image_id)
        got[f"chunks {label}: fetch + verify + load"] = timed(
            lambda: ensure_image(client, store, image_id, registry=None, spool=tmp / "spool")
        )
        got[f"chunks {label}: total"] = got[f"chunks {label}: publish"] + got[f"chunks {label}: fetch + verify + load"]

    redis.Redis.from_url(url).flushdb()
    got["registry: push"] = timed(lambda: push_to_registry(store, client, image_id, registry))
    got["registry: push again"] = timed(lambda: push_to_registry(store, client, image_id, registry))
    drop(client, image_id)
    got["registry: pull + verify"] = timed(
        lambda: ensure_image(client, store, image_id, registry=registry, spool=tmp / "spool")
    )
    got["registry: total"] = got["registry: push"] + got["registry: pull + verify"]
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="the image to copy and move")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the median of each figure is printed")
    args = parser.parse_args()
    client = docker_client()
    with tempfile.TemporaryDirectory(prefix="probegate-bench-") as name:
        tmp = Path(name)
        (tmp / "redis").mkdir()
        server = RedisServer(tmp / "redis")
        image_id = ""
        try:
            server.start()
            image_id = copy_of(client, args.image, tmp)
            rounds = []
            for round_ in range(args.repeat):
                registry = RegistryServer(tmp / f"registry-{round_}")  # empty: every first push is a real one
                registry.start()
                try:
                    rounds.append(measure(client, image_id, tmp, server.url, registry.address))
                finally:
                    registry.stop()
        finally:
            if image_id:
                drop(client, image_id)
            server.stop()
    figures = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    baseline = figures["baseline: save + load"]
    print(f"image: a {figures['size MB']:.0f} MB copy of {args.image} (save stream), {args.repeat} round(s)")
    for key, value in figures.items():
        if key.endswith("MB"):
            print(f"  {key:<40} {value:8.1f}")
        else:
            print(f"  {key:<40} {value:7.2f} s   x{value / baseline:.2f} of save + load")
    return 0


if __name__ == "__main__":
    sys.exit(main())
