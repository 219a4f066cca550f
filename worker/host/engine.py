"""The Docker engine behind one edge. Every docker SDK call of the worker goes through here, and
every docker or HTTP-transport exception leaves this module as a SandboxError with a one-line
reason: the rest of the worker catches the gate's errors only, never a docker type.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import docker
import docker.errors
import requests.exceptions

from gate.core.errors import SandboxError, last_line, reraise_as

# Must equal the TAG of the image definition (worker/host/sandbox_image, package data; a test checks).
DEFAULT_IMAGE = "probegate/sandbox-python:trixie-1"
_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
_CONFLICT = 409  # the engine is already removing the container (its owner is closing the run)
# A full image ID. The engine also resolves tags and short ID prefixes, so an ID taken from a message
# is checked against this before it is looked up.
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")


def engine_call(what: str) -> contextlib.AbstractContextManager[None]:
    """Run docker SDK calls; an engine or transport fault becomes SandboxError("{what}: reason")."""
    return reraise_as(SandboxError, what, _ENGINE_ERRORS)


def docker_client() -> docker.DockerClient:
    """A client for the local daemon, pinged once; SandboxError with a one-line reason if unreachable."""
    try:
        client = docker.from_env()
        client.ping()
    except (*_ENGINE_ERRORS, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SandboxError(f"docker daemon unreachable: {reason}") from exc
    return client


def security_options(client: docker.DockerClient) -> list[str]:
    """The engine's SecurityOptions (`docker info`), e.g. "name=seccomp,profile=default", "name=apparmor"."""
    with engine_call("asking the engine for its security options"):
        return list(client.info().get("SecurityOptions") or [])


def resolve_image_id(client: docker.DockerClient, tag: str) -> str:
    """The image ID (sha256:…) behind `tag`; SandboxError telling how to build it when absent."""
    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound as exc:
        raise SandboxError(f"sandbox image {tag} is missing; run `gate setup` (or `gate doctor`)") from exc
    except _ENGINE_ERRORS as exc:
        raise SandboxError(f"docker daemon error while resolving {tag}: {exc}") from exc


def image_attrs(client: docker.DockerClient, ref: str) -> dict[str, Any] | None:
    """The engine's inspect data of image `ref` (tag or ID), or None when it has no such image."""
    try:
        return client.images.get(ref).attrs
    except docker.errors.ImageNotFound:
        return None
    except _ENGINE_ERRORS as exc:
        raise SandboxError(f"docker daemon error while inspecting {ref}: {last_line(exc)}") from exc


def build_image(
    client: docker.DockerClient,
    context: BinaryIO,
    *,
    tag: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
    dockerfile: str = "Dockerfile",
) -> tuple[str, str]:
    """Build the tar `context` with no network; returns (image ID, the build log's tail).
    A failed step raises BuildFailed with the step's last output line; an engine fault SandboxError."""
    try:
        image, log = client.images.build(
            fileobj=context,
            custom_context=True,
            dockerfile=dockerfile,
            buildargs=buildargs,
            labels=labels,
            tag=tag,
            rm=True,
            forcerm=True,
            network_mode="none",  # also enforced by the engine (--bridge=none); said here for other engines
            pull=False,
        )
    except docker.errors.BuildError as exc:
        lines = [str(item.get("stream", item.get("error", ""))).strip() for item in exc.build_log]
        raise BuildFailed(next((line for line in reversed(lines) if line), str(exc))) from exc
    except _ENGINE_ERRORS as exc:
        raise SandboxError(f"docker daemon error while building {tag}: {last_line(exc)}") from exc
    tail = [str(item.get("stream", "")).strip() for item in log]
    return image.id, "\n".join(line for line in tail if line)[-2000:]


def prune_dangling(client: docker.DockerClient, *, label: str) -> None:
    """Remove untagged images carrying `label` (a multi-stage build's intermediate stages)."""
    with engine_call("pruning build stages"):
        client.images.prune(filters={"dangling": True, "label": label})


class BuildFailed(Exception):
    """A step of an image build failed (its definition's fault, not the engine's)."""


def run_once(client: docker.DockerClient, image_id: str, argv: list[str], *, timeout_s: float = 60) -> bytes:
    """Run `argv` in a throwaway, network-less container of `image_id` as nobody; its stdout.
    For facts about an image (its Python), never for trials."""
    with engine_call(f"running {argv[0]} in {image_id[:19]}"):
        container = client.containers.create(
            image_id, argv, network_mode="none", network_disabled=True, user="65534:65534", read_only=True
        )
        try:
            container.start()
            state = container.wait(timeout=timeout_s)
            out = container.logs(stdout=True, stderr=False)
            if state.get("StatusCode") != 0:
                err = container.logs(stdout=False, stderr=True).decode(errors="replace").strip()
                tail = err.splitlines()[-1] if err else "no output"
                raise SandboxError(f"{argv[0]} exited {state.get('StatusCode')} in {image_id[:19]}: {tail}")
            return out
        finally:
            container.remove(force=True)


def has_image(client: docker.DockerClient, image_id: str) -> bool:
    """Whether the engine holds exactly `image_id`; SandboxError when it is no full sha256:… ID."""
    if not IMAGE_ID.fullmatch(image_id):
        raise SandboxError(f"not an image ID: {image_id[:80]!r}")
    try:
        return client.images.get(image_id).id == image_id
    except docker.errors.ImageNotFound:
        return False
    except _ENGINE_ERRORS as exc:
        raise SandboxError(f"docker daemon error while looking for image {image_id[:19]}: {last_line(exc)}") from exc


def save_image(client: docker.DockerClient, image_id: str, piece_bytes: int) -> Iterator[bytes]:
    """The image as `docker save` writes it (no tag in it when saved by ID), streamed in pieces."""
    with engine_call(f"saving image {image_id[:19]}"):
        yield from client.api.get_image(image_id, chunk_size=piece_bytes)


def load_image(client: docker.DockerClient, data: Iterable[bytes]) -> list[str]:
    """Stream a `docker save` tar into the engine; what it reports loaded (IDs, or names for tagged images)."""
    loaded = []
    with engine_call("loading an image"):
        for line in client.api.load_image(data):
            _raise_streamed(line, "loading an image")
            match = re.match(r"Loaded image(?: ID)?: (\S+)", str(line.get("stream", "")))
            if match:
                loaded.append(match.group(1))
    return loaded


def tag_image(client: docker.DockerClient, image_id: str, repository: str, tag: str) -> None:
    with engine_call(f"tagging image {image_id[:19]} as {repository}:{tag}"):
        if not client.api.tag(image_id, repository, tag, force=True):
            raise SandboxError(f"the engine refused to tag {image_id[:19]} as {repository}:{tag}")


def push_image(client: docker.DockerClient, repository: str, tag: str) -> str:
    """Push `repository:tag`; the manifest digest (sha256:…) the registry now serves it under."""
    digest = ""
    what = f"pushing {repository}:{tag}"
    with engine_call(what):
        for line in client.api.push(repository, tag=tag, stream=True, decode=True):
            _raise_streamed(line, what)
            digest = (line.get("aux") or {}).get("Digest", digest)
    if not IMAGE_ID.fullmatch(digest):
        raise SandboxError(f"pushing {repository}:{tag}: the engine reported no manifest digest")
    return digest


def registry_serves(client: docker.DockerClient, reference: str) -> bool:
    """Whether the registry still serves `reference` (repository@digest), asked through the engine."""
    try:
        client.api.inspect_distribution(reference)
    except docker.errors.APIError:
        return False  # unknown there, or the registry is unreachable: either way, push again
    except _ENGINE_ERRORS as exc:
        raise SandboxError(f"asking the registry for {reference}: {last_line(exc)}") from exc
    return True


def pull_image(client: docker.DockerClient, repository: str, digest: str) -> str:
    """Pull `repository@digest` (the engine checks the manifest against the digest); the image's ID."""
    what = f"pulling {repository}@{digest[:19]}"
    with engine_call(what):
        for line in client.api.pull(repository, tag=digest, stream=True, decode=True):
            _raise_streamed(line, what)
        return client.images.get(f"{repository}@{digest}").id


def _raise_streamed(line: dict[str, Any], what: str) -> None:
    # Push, pull and load report a failure inside their 200 response's stream, not as a status code.
    if "error" in line or "errorDetail" in line:
        message = str(line.get("error") or (line.get("errorDetail") or {}).get("message") or "failed")
        raise SandboxError(f"{what}: {message.strip().splitlines()[-1] if message.strip() else 'failed'}")


class Container:
    """One container on the engine; each call raises SandboxError, never a docker exception."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    @property
    def id(self) -> str:
        return self._raw.id

    @property
    def labels(self) -> dict[str, str]:
        """Its labels; a sparse listing carries them at the top (no inspect, which races a removal)."""
        attrs = self._raw.attrs
        return attrs.get("Labels") or (attrs.get("Config") or {}).get("Labels") or {}

    def start(self) -> None:
        with engine_call("starting the container"):
            self._raw.start()

    def kill(self) -> None:
        with engine_call("killing the container"):
            self._raw.kill()

    def remove(self) -> bool:
        """Force-remove it; False when it was already gone or being removed by someone else."""
        try:
            self._raw.remove(force=True)
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code == _CONFLICT:
                return False
            raise SandboxError(f"removing the container: {last_line(exc)}") from exc
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"removing the container: {last_line(exc)}") from exc
        return True

    def attach(self) -> Attached:
        """Its stdout from the start (logs included), as a stream of chunks; attach before `start`."""
        with engine_call("attaching to the container"):
            return Attached(self._raw.attach(stdout=True, stderr=False, stream=True, logs=True))

    def ended(self, timeout_s: float) -> tuple[dict[str, Any], str]:
        """Wait for it to exit; its final State and the tail of its stderr."""
        with engine_call("reading the result"):
            self._raw.wait(timeout=timeout_s)
            self._raw.reload()
            tail = self._raw.logs(stdout=False, stderr=True)[-500:].decode(errors="replace")
            return self._raw.attrs["State"], tail


class Attached:
    """An attached output stream; iteration raises SandboxError when the engine drops it abruptly."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def __iter__(self) -> Iterator[bytes]:
        with engine_call("reading the container's output"):
            yield from self._raw

    def close(self) -> None:
        # Closing a dead stream may fail any way; we only let go of it.
        with contextlib.suppress(Exception):
            self._raw.close()


def create(client: docker.DockerClient, image_id: str, **options: Any) -> Container:
    """A created (not started) container of `image_id` with docker SDK `options`."""
    with engine_call("creating the container"):
        return Container(client.containers.create(image_id, **options))


def containers(client: docker.DockerClient, *, labels: list[str]) -> list[Container]:
    """Every container (running or not) carrying all of `labels` ("key" or "key=value"). Listed sparse:
    one call and no inspect per container, which fails when one is removed meanwhile (e.g. by its owner)."""
    with engine_call("listing containers"):
        return [Container(c) for c in client.containers.list(all=True, filters={"label": labels}, sparse=True)]


def container_by_id(client: docker.DockerClient, container_id: str) -> Container:
    """The container with this ID (one another local process created, e.g. the pool)."""
    with engine_call(f"looking up container {container_id[:12]}"):
        return Container(client.containers.get(container_id))
