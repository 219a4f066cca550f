"""The sandbox image on this machine, from its definition shipped in the package (sandbox_image/):
found present and matching that definition, or built from the Dockerfile where a registry answers,
or offline from the Debian mirror apt uses (build-offline.sh) where none does. `gate setup`,
`gate-worker` and `gate doctor` all come here; deploy/provision.sh runs the same offline script.
"""

from __future__ import annotations

import contextlib
import enum
import io
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import docker

from gate.core.errors import SandboxError, last_line
from worker.host.engine import DEFAULT_IMAGE, engine_call, image_attrs
from worker.host.preflight import image_config_problems

DEFINITION = "sandbox_image"  # the folder beside this module, package data
BASE_IMAGE = "debian:trixie-slim"  # the Dockerfile's FROM
# What the definition sets, checked on an image found present (both recipes set the same).
WANT_USER = "65534:65534"
WANT_ENV = ("FAKETIME_DONT_FAKE_MONOTONIC=1", "PYTHONDONTWRITEBYTECODE=1")
WANT_CMD = ["python3"]
SETUP_COMMAND = "gate setup"  # what every message naming a missing image tells the user to run


class How(enum.Enum):
    """How setup got the image: found, or built by one of the two recipes."""

    PRESENT = "present"
    DOCKERFILE = "dockerfile"
    OFFLINE = "offline"


@dataclass(frozen=True)
class SetupResult:
    tag: str
    image_id: str
    how: How
    detail: str  # one line: what was found or built, and from what

    def line(self) -> str:
        return f"{self.tag} {self.detail} ({self.image_id[:19]})"


@contextlib.contextmanager
def definition_dir() -> Iterator[Path]:
    """The image's definition (Dockerfile, build-offline.sh, TAG) as a real folder, wherever installed."""
    with resources.as_file(resources.files("worker.host") / DEFINITION) as path:
        yield Path(path)


def definition_problems(attrs: dict[str, Any]) -> list[str]:
    """How an image's configuration differs from the definition's; empty when it matches."""
    config = attrs.get("Config") or {}
    problems = image_config_problems(attrs)
    if (config.get("User") or "root") != WANT_USER and not any(p.startswith("it runs as") for p in problems):
        problems.append(f"it runs as {config.get('User') or 'root'}, not {WANT_USER}")
    env = set(config.get("Env") or [])
    problems += [f"its environment lacks {item}" for item in WANT_ENV if item not in env]
    if (config.get("Cmd") or []) != WANT_CMD:
        problems.append(f"its command is {config.get('Cmd')}, not {WANT_CMD}")
    return problems


def check_present(client: docker.DockerClient, tag: str = DEFAULT_IMAGE) -> SetupResult | None:
    """The image under `tag` when present and matching its definition; None when absent; SandboxError
    naming what differs when present but not as defined."""
    attrs = image_attrs(client, tag)
    if attrs is None:
        return None
    problems = definition_problems(attrs)
    if problems:
        raise SandboxError(
            f"sandbox image {tag} differs from its definition: {'; '.join(problems)}; "
            f"rebuild it with `{SETUP_COMMAND} --force`"
        )
    return SetupResult(tag, attrs["Id"], How.PRESENT, "present, matches its definition")


def registry_reachable(client: docker.DockerClient) -> bool:
    """Whether the engine can pull the Dockerfile's base (it asks the registry for the manifest only)."""
    if image_attrs(client, BASE_IMAGE) is not None:
        return True
    try:
        with engine_call(f"asking the registry for {BASE_IMAGE}"):
            client.api.inspect_distribution(BASE_IMAGE)
    except SandboxError:
        return False
    return True


def ensure_sandbox_image(
    client: docker.DockerClient,
    *,
    tag: str = DEFAULT_IMAGE,
    force: bool = False,
    how: How | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> SetupResult:
    """The sandbox image under `tag`: found present (unless `force`), else built by `how` (default:
    the Dockerfile when a registry answers, offline otherwise). SandboxError with the reason on failure."""
    if not force:
        found = check_present(client, tag)
        if found is not None:
            return found
    if how is None:
        how = How.DOCKERFILE if registry_reachable(client) else How.OFFLINE
    if how is How.DOCKERFILE:
        log(f"building {tag} from the Dockerfile (pulls {BASE_IMAGE})")
        image_id = _build_dockerfile(client, tag)
        detail = f"built from the Dockerfile on {BASE_IMAGE}"
    else:
        log(f"building {tag} offline: debootstrap from this machine's Debian mirror (about a minute)")
        mirror = _build_offline(tag)
        attrs = image_attrs(client, tag)
        if attrs is None:
            raise SandboxError(f"the offline build reported success but {tag} is not on the engine")
        image_id = attrs["Id"]
        detail = f"built offline from the Debian mirror {mirror}" if mirror else "built offline from the Debian mirror"
    found = check_present(client, tag)
    if found is None or found.image_id != image_id:
        raise SandboxError(f"built {tag}, but the engine does not show it under that tag")
    return SetupResult(tag, image_id, how, detail)


def _build_dockerfile(client: docker.DockerClient, tag: str) -> str:
    with definition_dir() as folder:
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            tar.add(folder / "Dockerfile", arcname="Dockerfile")
        context.seek(0)
    try:
        with engine_call(f"building {tag} from the Dockerfile"):
            # The engine may run no bridge network (deploy/provision.sh): apt in the build uses the host's.
            image, _ = client.images.build(
                fileobj=context, custom_context=True, tag=tag, rm=True, pull=True, network_mode="host"
            )
    except docker.errors.BuildError as exc:
        raise SandboxError(f"building {tag} from the Dockerfile failed: {last_line(exc)}") from exc
    return str(image.id)


def _build_offline(tag: str) -> str:
    """Run build-offline.sh for `tag` (its progress goes to stderr); the mirror it used, from its last line."""
    with definition_dir() as folder:
        try:
            done = subprocess.run(
                ["bash", str(folder / "build-offline.sh"), "--force", "--tag", tag],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
        except OSError as exc:
            raise SandboxError(f"cannot run the offline build: {exc}") from exc
    lines = done.stderr.strip().splitlines()
    if done.returncode != 0:
        raise SandboxError(f"the offline build of {tag} failed: {' / '.join(lines[-3:]) or done.returncode}")
    marker = " offline from "
    last = lines[-1] if lines else ""
    return last.split(marker, 1)[1].split(" ", 1)[0] if marker in last else ""
