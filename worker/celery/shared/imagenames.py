"""What a run image is called on the broker and in a registry, for both sides: the coordinator publishes
under these names (worker.celery.coordinator.imagepublish) and a worker fetches by them
(worker.celery.worker.imagefetch).

Names in the blob store, per image ID (and run, for a failure):
  image:<image id>                  → the chunk manifest's digest (worker.celery.shared.imagechunks)
  registry:<image id>               → the registry manifest's digest (hex) of the pushed image
  image-failed:<run id>:<image id>  → a blob saying why the coordinator could not publish it
"""

from __future__ import annotations

import re

from gate.core.errors import UsageError

REPOSITORY = "probegate/project"  # under the registry: <registry>/probegate/project
_REGISTRY = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._/-][a-z0-9]+)*)?")


def manifest_name(image_id: str) -> str:
    return f"image:{image_id}"


def registry_name(image_id: str) -> str:
    return f"registry:{image_id}"


def failure_name(run_id: str, image_id: str) -> str:
    return f"image-failed:{run_id}:{image_id}"


def registry_repository(registry: str) -> str:
    """`<registry>/probegate/project` for a registry given as host[:port][/path]; UsageError otherwise."""
    if not _REGISTRY.fullmatch(registry):
        raise UsageError(f"--registry must be host[:port][/path] without a scheme, not {registry[:80]!r}")
    return f"{registry}/{REPOSITORY}"
