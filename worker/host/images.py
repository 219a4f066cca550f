"""Project images: the sandbox image a suite's probes run in when the project needs more than the
base's python3 — built FROM the probegate base image from the suite's Dockerfile, or from its
hashed lock file through a host-side wheelhouse (worker/host/wheelhouse.py).

An image is found again by the digest of its inputs (base image ID, definition bytes, build
context), so `gate run` builds only when one of them changed. Every image, found or built, must
descend from the base (its layers start with the base's); the preflight (`prove_image`) decides
whether a trial may run in it.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import docker

from gate.core.errors import GateError, ImageError, SandboxError
from gate.core.suite.suite import ImageSource
from gate.io.fixtures import seal_tree, tree_files
from gate.io.inputs import read_input
from worker.host.engine import BuildFailed, build_image, image_attrs, prune_dangling, resolve_image_id, run_once
from worker.host.wheelhouse import TARGET_PROBE, PythonTarget, download

RECIPE = "probegate-image-1"  # bump when the generated build changes, so cached images are rebuilt
REPOSITORY = "probegate/project"
LABEL_INPUTS = "probegate.inputs"
LABEL_STAGE = "probegate.stage"  # marks the throwaway install stage, pruned after the build
BASE_ARG = "PROBEGATE_BASE"  # the build argument a project Dockerfile takes: `FROM ${PROBEGATE_BASE}`


class ProjectImageMissing(SandboxError):
    """The project image is not on the engine, and the caller asked not to build it."""


def project_image(
    client: docker.DockerClient,
    source: ImageSource,
    *,
    base: str,
    emit: Callable[[str], None] = lambda _: None,
    build: bool = True,
) -> str:
    """The ID of the project image for `source` on top of image `base`: found by its inputs' digest,
    else built now (`build`=False: SandboxError instead). ImageError when the definition is refused;
    SandboxError for engine faults."""
    base_attrs = image_attrs(client, resolve_image_id(client, base))
    if base_attrs is None:
        raise SandboxError(f"sandbox image {base} vanished while building on it")
    data = _read(source.definition, source.label)
    context_seal = seal_tree(source.definition.parent).digest if source.kind == "dockerfile" else ""
    inputs = _digest(
        {"recipe": RECIPE, "kind": source.kind, "base": base_attrs["Id"], "definition": data, "context": context_seal}
    )
    tag = f"{REPOSITORY}:{inputs[:32]}"
    found = image_attrs(client, tag)
    if found is None or (found.get("Config") or {}).get("Labels", {}).get(LABEL_INPUTS) != inputs:
        if not build:
            raise ProjectImageMissing(f"project image {tag} for {source.label} is not built yet")
        emit(f"building project image {tag} from {source.label}")
        # This build's own stages carry its id: the prune below must not take a stage that a build
        # running alongside (another run, another test) still has to copy from.
        build_id = uuid.uuid4().hex
        with tempfile.TemporaryDirectory(prefix="probegate-image-") as tmp:
            context, dockerfile = _context(client, source, base_attrs["Id"], Path(tmp), build_id)
            try:
                image_id, _ = build_image(
                    client,
                    context,
                    tag=tag,
                    buildargs={BASE_ARG: base_attrs["Id"]},
                    labels={LABEL_INPUTS: inputs},
                    dockerfile=dockerfile,
                )
            except BuildFailed as exc:
                raise ImageError(f"image build failed: {str(exc)[:300]}", file=source.label) from None
            finally:
                prune_dangling(client, label=f"{LABEL_STAGE}={build_id}")
        found = image_attrs(client, image_id)
        if found is None:
            raise SandboxError(f"built image {image_id[:19]} vanished")
    check_descends(found, base_attrs, label=source.label)
    return str(found["Id"])


def check_descends(image: dict, base: dict, *, label: str) -> None:
    """Refuse an image not built FROM the base: its layers must start with all of the base's."""
    layers = (image.get("RootFS") or {}).get("Layers") or []
    base_layers = (base.get("RootFS") or {}).get("Layers") or []
    if not base_layers or layers[: len(base_layers)] != base_layers:
        raise ImageError(
            f"the image is not built FROM the probegate base image; start the Dockerfile with "
            f"`ARG {BASE_ARG}` and `FROM ${{{BASE_ARG}}}`",
            file=label,
        )


def python_target(client: docker.DockerClient, base_id: str) -> PythonTarget:
    """What wheels the base image's python3 takes (asked of the image itself)."""
    raw = run_once(client, base_id, ["python3", "-I", "-S", "-c", TARGET_PROBE])
    try:
        return PythonTarget.parse(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise SandboxError(f"cannot tell the base image's Python: {exc}") from None


def _context(
    client: docker.DockerClient, source: ImageSource, base_id: str, tmp: Path, build_id: str
) -> tuple[io.BytesIO, str]:
    """The build context (a tar) and the Dockerfile's name in it."""
    if source.kind == "dockerfile":
        folder = source.definition.parent
        return _tar(
            {rel: read_input(folder / rel, "build context file") for rel in tree_files(folder)}
        ), source.definition.name
    target = python_target(client, base_id)
    wheels = tmp / "wheels"
    names = download(source.definition, wheels, target, label=source.label)
    (pip_wheel,) = sorted(path.name for path in (wheels / "tools").glob("pip-*.whl"))[-1:] or ("",)
    if not pip_wheel:
        raise ImageError("no pip wheel was downloaded for the image build", file=source.label)
    files = {f"wheels/{name}": (wheels / name).read_bytes() for name in names}
    files[f"wheels/tools/{pip_wheel}"] = (wheels / "tools" / pip_wheel).read_bytes()
    files["wheels/requirements.txt"] = _read(source.definition, source.label)
    files["Dockerfile"] = lock_dockerfile(pip_wheel, target.site_packages, build_id).encode()
    return _tar(files), "Dockerfile"


def lock_dockerfile(pip_wheel: str, site_packages: str, build_id: str) -> str:
    """Install the wheelhouse with pip run from its wheel (the base has no pip), offline and
    hash-checked, in a first stage (labelled with `build_id`, so its build prunes it and nothing else);
    only the installed packages reach the image."""
    install = (
        f"python3 /wheels/tools/{pip_wheel}/pip install --no-index --find-links /wheels --require-hashes "
        "--disable-pip-version-check --no-cache-dir --no-warn-script-location --target /deps "
        "-r /wheels/requirements.txt"
    )
    return (
        f"ARG {BASE_ARG}\n"
        f"FROM ${{{BASE_ARG}}} AS deps\n"
        f"LABEL {LABEL_STAGE}={build_id}\n"
        "USER 0:0\n"
        "COPY wheels /wheels\n"
        f"RUN {install}\n"
        f"FROM ${{{BASE_ARG}}}\n"
        f"COPY --from=deps /deps {site_packages}\n"
    )


def _tar(files: dict[str, bytes]) -> io.BytesIO:
    """A deterministic tar of `files` (sorted, owned by root, mtime 0)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(files[name]), 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    buffer.seek(0)
    return buffer


def _read(path: Path, label: str) -> bytes:
    try:
        return read_input(path, "image definition")
    except GateError as exc:
        raise ImageError(f"cannot read the image definition: {exc.message}", file=label) from None


def _digest(fields: dict[str, object]) -> str:
    canonical = {
        key: hashlib.sha256(value).hexdigest() if isinstance(value, bytes) else value for key, value in fields.items()
    }
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()
