"""The sandbox image and the Docker daemon: which image trials run in, and whether it is there."""

from __future__ import annotations

import docker
import docker.errors
import requests.exceptions

from gate.core.errors import SandboxError

# Must equal sandbox_images/python/TAG (a test checks); a literal so an installed wheel needs no checkout.
DEFAULT_IMAGE = "probegate/sandbox-python:trixie-1"
DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


def docker_client() -> docker.DockerClient:
    """A client for the local daemon, pinged once; SandboxError with a one-line reason if unreachable."""
    try:
        client = docker.from_env()
        client.ping()
    except (*DOCKER_ERRORS, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SandboxError(f"docker daemon unreachable: {reason}") from exc
    return client


def resolve_image_id(client: docker.DockerClient, tag: str) -> str:
    """The image ID (sha256:…) behind `tag`; SandboxError telling how to build it when absent."""
    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound as exc:
        raise SandboxError(f"sandbox image {tag} is missing; run sandbox_images/python/build-offline.sh") from exc
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        raise SandboxError(f"docker daemon error while resolving {tag}: {exc}") from exc
