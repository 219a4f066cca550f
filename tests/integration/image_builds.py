"""Small images for the image-transport tests, built offline through the engine's build API (no
network: COPY only) with unique content, so no two test sessions share an image ID; removed at
teardown, and never one that carries the shared sandbox image's tag."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import uuid

import docker
import docker.errors

from worker.host.engine import DEFAULT_IMAGE, save_image


class ImageMaker:
    """Builds and tracks test images; `cleanup` removes every tracked one (by ID, all its tags)."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        self.made: list[str] = []

    def build(self, dockerfile: str, files: dict[str, bytes]) -> str:
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            for name, data in {"Dockerfile": dockerfile.encode(), **files}.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        context.seek(0)
        tag = f"probegate/test-images:{uuid.uuid4().hex[:12]}"
        image, _ = self.client.images.build(
            fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, network_mode="none"
        )
        self.made.append(image.id)
        return image.id

    def scratch(self) -> str:
        """A few-KB image holding one unique file: cheap to move, never run."""
        return self.build("FROM scratch\nCOPY payload /payload\n", {"payload": uuid.uuid4().bytes * 64})

    def derived(self, base_id: str, text: str) -> str:
        """The sandbox image plus /derived.txt holding `text` (readable by the sandbox user)."""
        return self.build(f"FROM {base_id}\nCOPY derived.txt /derived.txt\n", {"derived.txt": text.encode()})

    def drop(self, image_id: str) -> None:
        """Remove the image from the engine, as if this were another machine that never had it, with
        any container still made from it (an image in use is not removed, even by force)."""
        with contextlib.suppress(docker.errors.ImageNotFound):
            image = self.client.images.get(image_id)
            if DEFAULT_IMAGE in image.tags:  # the shared sandbox image is never ours to remove
                raise AssertionError(f"refusing to remove {image_id}: it is {DEFAULT_IMAGE}")
            for container in self.client.containers.list(all=True, filters={"ancestor": image_id}, sparse=True):
                with contextlib.suppress(docker.errors.NotFound):
                    container.remove(force=True)
            self.client.images.remove(image_id, force=True)

    def cleanup(self) -> None:
        for image_id in self.made:
            with contextlib.suppress(docker.errors.APIError, AssertionError):
                self.drop(image_id)


def saved(client: docker.DockerClient, image_id: str) -> bytes:
    """The image's `docker save` stream, whole."""
    return b"".join(save_image(client, image_id, 1 << 20))


def rewrite_save(stream: bytes, *, config_as: str | None = None, repo_tags: list[str] | None = None) -> bytes:
    """A forged copy of a save stream: its config file renamed after `config_as` (an image ID), or
    its manifest naming `repo_tags` (which `docker load` would point at the image)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(stream)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        [entry] = json.loads(src.extractfile("manifest.json").read())  # type: ignore[union-attr]
        old_config = entry["Config"]
        if config_as is not None:
            entry["Config"] = config_as.removeprefix("sha256:") + ".json"
        if repo_tags is not None:
            entry["RepoTags"] = repo_tags
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.name == "manifest.json":
                data = json.dumps([entry]).encode()
                member.size = len(data)
            elif member.name == old_config:
                member.name = entry["Config"]
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    return out.getvalue()
