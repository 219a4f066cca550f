"""Project images on the real engine: built from a Dockerfile FROM the base or from a hashed lock,
and refused in one line (exit 65, nothing run) when the definition reaches around the sandbox."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from support.paths import WINDOWS

from gate.core.errors import RET_CONFIG, RET_OK
from worker.host.images import LABEL_INPUTS

SUITE = """
[suite]
name = "image"
[suite.image]
{source}
[[property]]
id = "runs"
band = "contract"
fixture = "a.json"
check = "builtin:exits_zero"
"""


# One worker takes these tests in turn: each holds the machine's project-image lock throughout, so the
# others would only wait for it on other workers.
pytestmark = pytest.mark.xdist_group("project_images")


@pytest.fixture
def built(docker_client: docker.DockerClient, sandbox_image: str, project_image_builds: None) -> Iterator[list[str]]:
    """Image IDs a test built; every project image that appeared meanwhile is removed afterwards
    (refused ones too; the base image is never touched). No other test builds one meanwhile: the
    machine's project-image lock is held from before the first listing to after the removal."""

    def project_images() -> set[str]:
        return {image.id for image in docker_client.images.list(filters={"label": LABEL_INPUTS})}

    before = project_images()
    ids: list[str] = []
    yield ids
    for image_id in project_images() - before:
        with contextlib.suppress(docker.errors.APIError):
            docker_client.images.remove(image_id, force=True)


def build(tmp_path: Path, source: str, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`gate image build` on a suite whose [suite.image] is `source`, with `files` beside it."""
    (tmp_path / "gate.toml").write_text(SUITE.format(source=source))
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    return subprocess.run(
        [sys.executable, "-m", "gate.cli", "image", "build", "--suite", str(tmp_path / "gate.toml")],
        capture_output=True,
        text=True,
        timeout=600,
    )


def dockerfile(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    head = "ARG PROBEGATE_BASE\nFROM ${PROBEGATE_BASE}\n"
    return build(tmp_path, 'dockerfile = "sandbox/Dockerfile"', {"sandbox/Dockerfile": head + textwrap.dedent(body)})


def refused(done: subprocess.CompletedProcess[str], said: str) -> None:
    assert done.returncode == RET_CONFIG, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("gate: error:")]
    assert said in line, line


def test_a_dockerfile_from_the_base_builds_and_is_found_again(
    tmp_path: Path, built: list[str], docker_client: docker.DockerClient
) -> None:
    """A Dockerfile FROM ${PROBEGATE_BASE} builds; a second build with the same inputs finds the same image."""
    body = "USER 0:0\nRUN mkdir -p /opt/data && echo baked > /opt/data/marker\nUSER 65534:65534\n"
    first = dockerfile(tmp_path, body)
    assert first.returncode == RET_OK, first.stderr
    built.append(first.stdout.strip())
    assert "building project image" in first.stderr
    again = dockerfile(tmp_path, body)
    assert again.stdout.strip() == first.stdout.strip() and "building" not in again.stderr
    image_id = first.stdout.strip()
    out = docker_client.containers.run(image_id, ["cat", "/opt/data/marker"], remove=True, network_mode="none")
    assert out == b"baked\n"


def test_an_image_that_sets_pythonpath_is_refused(tmp_path: Path, built: list[str]) -> None:
    """A derived image that sets PYTHONPATH is refused by the preflight, naming it; nothing runs in it."""
    refused(dockerfile(tmp_path, "ENV PYTHONPATH=/opt/evil\n"), "it sets PYTHONPATH")


def test_an_image_that_drops_the_clock_preload_is_refused(tmp_path: Path, built: list[str]) -> None:
    """A derived image without /etc/ld.so.preload reads the real clock: the preflight refuses it."""
    body = "USER 0:0\nRUN rm /etc/ld.so.preload\nUSER 65534:65534\n"
    done = dockerfile(tmp_path, body)
    refused(done, "preflight failed")
    assert "sandbox/Dockerfile" in done.stderr and "not the frozen" in done.stderr


def test_an_image_that_runs_as_root_is_refused(tmp_path: Path, built: list[str]) -> None:
    """A derived image left as USER root is refused by the preflight's static check."""
    refused(dockerfile(tmp_path, "USER 0:0\n"), "runs as 0:0")


def test_a_dockerfile_not_from_the_base_is_refused(tmp_path: Path, built: list[str], sandbox_image: str) -> None:
    """A Dockerfile built FROM another image (here: an empty one) is refused, with the FROM line to use."""
    files = {"sandbox/Dockerfile": "FROM scratch\nCOPY marker /marker\n", "sandbox/marker": "x\n"}
    refused(build(tmp_path, 'dockerfile = "sandbox/Dockerfile"', files), "not built FROM the probegate base")


def test_a_failing_build_step_is_one_line(tmp_path: Path, built: list[str]) -> None:
    """A RUN step that fails (no network in the build) is one line with the step's last output."""
    refused(dockerfile(tmp_path, "RUN exit 3\n"), "image build failed")


def test_a_lock_builds_an_image_with_its_wheels(
    tmp_path: Path, windows_project_image: str, built: list[str], docker_client
) -> None:
    """A hashed lock becomes an image whose python3 imports the locked package, compiled parts included."""
    # The windows example's lock: its image was built once for the session (windows_project_image) and is found.
    lock = (WINDOWS / "repo" / "requirements.lock").read_text()
    done = build(tmp_path, 'requirements = "requirements.lock"', {"requirements.lock": lock})
    assert done.returncode == RET_OK, done.stderr
    built.append(done.stdout.strip())
    out = docker_client.containers.run(
        done.stdout.strip(),
        ["python3", "-c", "import yaml, dateutil; print(yaml.__with_libyaml__, dateutil.__version__)"],
        remove=True,
        network_mode="none",
    )
    assert out == b"True 2.9.0.post0\n"


def test_a_source_only_dependency_is_refused_by_name(tmp_path: Path, built: list[str]) -> None:
    """A lock pinning a package that ships only as source (docopt 0.6.2) is refused in one line naming it."""
    lock = "docopt==0.6.2 --hash=sha256:49b3a825280bd66b3aa83585ef59c4a8c82f2c8a522dbe754a8bc8d08c85c491\n"
    done = build(tmp_path, 'requirements = "requirements.lock"', {"requirements.lock": lock})
    refused(done, "docopt==0.6.2 has no wheel for the image's Python")


def test_an_unhashed_lock_is_refused(tmp_path: Path, built: list[str]) -> None:
    """A lock without hashes is refused before anything is built."""
    done = build(tmp_path, 'requirements = "requirements.lock"', {"requirements.lock": "six==1.16.0\n"})
    refused(done, "--hash=sha256")
