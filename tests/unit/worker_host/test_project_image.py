"""Project images without an engine: the suite's [suite.image] and pythonpath, the wheel tags a
wheelhouse asks for, pip's refusals as one line, and the preflight's static image checks."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from gate.core.errors import ImageError
from gate.core.suite.suite import ImageConfig, SuiteConfig
from gate.core.testing import make_spec
from worker.host.batchfile import probe_env
from worker.host.images import check_descends, lock_dockerfile
from worker.host.preflight import image_config_problems
from worker.host.wheelhouse import PythonTarget, pip_problem

BASE_CONFIG = {
    "User": "65534:65534",
    "Env": ["FAKETIME_DONT_FAKE_MONOTONIC=1", "PYTHONDONTWRITEBYTECODE=1", "PATH=/usr/bin:/bin"],
    "Cmd": ["python3"],
}
TRIXIE = PythonTarget(python=(3, 13), machine="x86_64", glibc=(2, 41))


def test_image_needs_exactly_one_definition() -> None:
    """[suite.image] names a Dockerfile or a lock file, not both and not neither."""
    assert ImageConfig(requirements="requirements.lock").definition == "requirements.lock"
    for given in ({}, {"dockerfile": "sandbox/Dockerfile", "requirements": "requirements.lock"}):
        with pytest.raises(ValidationError, match="exactly one"):
            ImageConfig(**given)


@pytest.mark.parametrize("entry", ["/src", "../outside", "src/../../x", "a:b", ""])
def test_pythonpath_stays_inside_the_tree(entry: str) -> None:
    """A pythonpath entry that is absolute, climbs out, or holds a path separator is refused."""
    with pytest.raises(ValidationError, match="inside the patched tree"):
        SuiteConfig(pythonpath=(entry,))


def test_probe_gets_the_suites_pythonpath_under_the_work_copy() -> None:
    """The probe's PYTHONPATH is the suite's folders under /work, and absent when none are named."""
    assert "PYTHONPATH" not in probe_env(make_spec())
    spec = make_spec().model_copy(update={"pythonpath": ("src", "lib/vendor")})
    assert probe_env(spec)["PYTHONPATH"] == "/work/src:/work/lib/vendor"


def test_target_parses_the_images_own_report() -> None:
    """The base image's report (Python, machine, glibc) becomes the wheel tags pip is asked for."""
    raw = json.dumps({"python": [3, 13], "machine": "x86_64", "libc": "glibc 2.41"}).encode()
    target = PythonTarget.parse(raw)
    assert target == TRIXIE and target.abi == "cp313"
    assert target.site_packages == "/usr/local/lib/python3.13/dist-packages"
    tags = target.platforms()
    assert tags[0] == "manylinux_2_41_x86_64" and "manylinux2014_x86_64" in tags and "manylinux1_x86_64" in tags
    assert not any("musllinux" in tag for tag in tags)


def test_a_musl_image_is_not_a_wheel_target() -> None:
    """An image without glibc cannot take manylinux wheels: refused rather than guessed."""
    with pytest.raises(ValueError, match="glibc"):
        PythonTarget.parse(json.dumps({"python": [3, 12], "machine": "x86_64", "libc": ""}).encode())


def test_a_source_only_dependency_is_named_in_one_line() -> None:
    """pip's 'no matching distribution' for a requirement becomes one line naming it and the image's Python."""
    stderr = "ERROR: Could not find a version that satisfies the requirement docopt==0.6.2 (from versions: none)\n"
    line = pip_problem(stderr, TRIXIE)
    assert line.startswith("docopt==0.6.2 has no wheel for the image's Python (cp313") and "\n" not in line


def test_an_unhashed_lock_is_refused_with_the_fix() -> None:
    """A lock without hashes is refused, saying how to make one."""
    stderr = "ERROR: Hashes are required in --require-hashes mode, but they are missing from some requirements."
    assert "--hash=sha256" in pip_problem(stderr, TRIXIE)


def test_the_base_images_configuration_passes() -> None:
    """The bundled base image's configuration raises no problem."""
    assert image_config_problems({"Config": BASE_CONFIG}) == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"Env": [*BASE_CONFIG["Env"], "PYTHONPATH=/opt/evil"]}, "sets PYTHONPATH"),
        ({"Env": [*BASE_CONFIG["Env"], "LD_PRELOAD=/x.so"]}, "sets LD_PRELOAD"),
        ({"Env": [*BASE_CONFIG["Env"], "LD_LIBRARY_PATH=/x"]}, "sets LD_LIBRARY_PATH"),
        ({"Env": [*BASE_CONFIG["Env"], "PYTHONSTARTUP=/x.py"]}, "sets PYTHONSTARTUP"),
        ({"Env": [*BASE_CONFIG["Env"], "FAKETIME=@2000-01-01"]}, "sets FAKETIME"),
        ({"Env": ["FAKETIME_DONT_FAKE_MONOTONIC=0"]}, "FAKETIME_DONT_FAKE_MONOTONIC=0"),
        ({"User": ""}, "runs as root"),
        ({"User": "0:0"}, "runs as 0:0"),
        ({"Entrypoint": ["/bin/sh", "-c"]}, "entrypoint"),
        ({"Volumes": {"/data": {}}}, "volumes ['/data']"),
    ],
)
def test_a_derived_image_that_reaches_around_the_sandbox_is_refused(change: dict, said: str) -> None:
    """An image setting the interpreter's, loader's or clock's environment, another user, an entrypoint
    or a volume is refused by name before any trial runs in it."""
    problems = image_config_problems({"Config": {**BASE_CONFIG, **change}})
    assert any(said in problem for problem in problems), problems


def test_an_image_not_built_from_the_base_is_refused() -> None:
    """An image whose layers do not start with the base's is refused, saying how to write the FROM line."""
    base = {"RootFS": {"Layers": ["sha256:aa"]}}
    check_descends({"RootFS": {"Layers": ["sha256:aa", "sha256:bb"]}}, base, label="sandbox/Dockerfile")
    with pytest.raises(ImageError, match=r"FROM \$\{PROBEGATE_BASE\}"):
        check_descends({"RootFS": {"Layers": ["sha256:cc", "sha256:aa"]}}, base, label="sandbox/Dockerfile")


def test_the_lock_build_installs_offline_and_hash_checked() -> None:
    """The generated build runs pip from its wheel with no index and hashes required, and only the
    installed packages reach the final stage; the install stage carries its build's own id, so the prune
    after the build takes this stage and no other build's."""
    text = lock_dockerfile("pip-26.0-py3-none-any.whl", TRIXIE.site_packages, "b1d")
    assert "LABEL probegate.stage=b1d\n" in text
    assert "--no-index" in text and "--require-hashes" in text
    assert "/wheels/tools/pip-26.0-py3-none-any.whl/pip install" in text
    assert text.rstrip().endswith("COPY --from=deps /deps /usr/local/lib/python3.13/dist-packages")
