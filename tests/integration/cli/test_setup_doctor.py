"""`gate setup` and `gate doctor` as a user runs them: the console script, the real engine and image,
real git and a real closed port. (The wheel's own flow, setup to accept, is .ci/wheel in CI.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

from gate_runs import GATE
from second_engine import SecondEngine

from gate.core.errors import RET_HARNESS, RET_OK

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e.invalid"}


def gate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(GATE), *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def repo_with_two_commits(path: Path) -> Path:
    path.mkdir()
    for argv in (
        ["init", "-q"],
        ["commit", "-q", "--allow-empty", "-m", "a"],
        ["commit", "-q", "--allow-empty", "-m", "b"],
    ):
        subprocess.run(["git", "-C", str(path), *argv], check=True, capture_output=True, env=GIT_ENV)
    return path


def test_setup_finds_the_present_image_and_says_so(sandbox_image: str, tmp_path: Path) -> None:
    """With the image built, `gate setup` builds nothing: it says the image is present and as defined,
    and that the preflight passes in it."""
    done = gate("setup", cwd=tmp_path)
    assert done.returncode == RET_OK, done.stderr
    assert f"present, matches its definition ({sandbox_image[:19]})" in done.stdout
    assert "preflight passes: frozen clock, closed network" in done.stdout
    assert "building" not in done.stderr


def test_doctor_is_green_where_the_gate_can_run(sandbox_image: str, tmp_path: Path) -> None:
    """In a full clone with its base, with the engine, the image and the local Redis: exit 0, nothing failed."""
    repo = repo_with_two_commits(tmp_path / "repo")
    done = gate("doctor", "--json", "--base", "HEAD~1", "--ledger", "redis://127.0.0.1:6379/0", cwd=repo)
    document = json.loads(done.stdout)
    assert done.returncode == RET_OK, document
    checks = {row["check"]: row["status"] for row in document["checks"]}
    assert {"docker engine", "sandbox image", "frozen clock", "preflight", "redis (books)", "git history"} <= set(
        checks
    )
    assert "fail" not in checks.values()


def test_doctor_names_each_problem_and_its_fix(tmp_path: Path) -> None:
    """No engine (a socket that is not there), Redis down (a closed port) and a shallow clone: one failing
    line each with its fix, and exit 2."""
    origin = repo_with_two_commits(tmp_path / "origin")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow)], check=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    done = gate("doctor", "--ledger", f"redis://127.0.0.1:{port}/0", cwd=shallow, env=env)
    assert done.returncode == RET_HARNESS
    failed = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("FAIL")}
    assert set(failed) == {"docker", "redis", "git"}, done.stdout
    assert "-> start the Docker engine" in failed["docker"]
    assert "unreachable" in failed["redis"] and "-> start redis-server" in failed["redis"]
    assert "shallow" in failed["git"] and "--unshallow" in failed["git"]
    assert done.stdout.splitlines()[-1] == "gate doctor: 3 problem(s)"


def test_doctor_warns_of_a_project_image_not_built_yet(sandbox_image: str, tmp_path: Path) -> None:
    """A suite whose [suite.image] is not built yet is a warning naming `gate image build` (the first run
    builds it), not a failure: nothing is built by the doctor."""
    repo = repo_with_two_commits(tmp_path / "repo")
    assert gate("init", cwd=repo).returncode == RET_OK
    (repo / "sandbox").mkdir()
    marker = os.urandom(8).hex()  # a definition no earlier build has seen
    (repo / "sandbox" / "Dockerfile").write_text(f"ARG PROBEGATE_BASE\nFROM ${{PROBEGATE_BASE}}\nLABEL t={marker}\n")
    toml = (repo / "gate.toml").read_text()
    (repo / "gate.toml").write_text(
        toml.replace("# [suite.image]", '[suite.image]\ndockerfile = "sandbox/Dockerfile"', 1)
    )
    done = gate("doctor", "--json", cwd=repo)
    rows = {row["check"]: row for row in json.loads(done.stdout)["checks"]}
    assert done.returncode == RET_OK, rows
    assert rows["project image"]["status"] == "warn" and "not built yet" in rows["project image"]["detail"]
    assert "gate image build" in rows["project image"]["fix"]


def test_doctor_on_an_engine_without_the_image_says_to_run_setup(tmp_path: Path) -> None:
    """On a reachable engine that lacks the sandbox image (a fresh one, as on a new machine), the image line
    fails with `gate setup` as its fix, the checks that need the image are not claimed to pass, exit 2."""
    engine = SecondEngine()
    try:
        engine.start(None)
        done = gate("doctor", cwd=repo_with_two_commits(tmp_path / "repo"), env={**os.environ, **engine.env})
    finally:
        engine.stop()
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.split()[:1] in (["ok"], ["FAIL"])}
    assert done.returncode == RET_HARNESS, done.stdout
    assert lines["docker"].startswith("ok"), done.stdout
    assert lines["sandbox"].startswith("FAIL") and "gate setup" in lines["sandbox"], done.stdout
    assert not any(lines[name].startswith("ok") for name in ("frozen", "preflight") if name in lines), done.stdout
