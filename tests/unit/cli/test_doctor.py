"""`gate doctor`'s checks: each failing one is one line naming the problem and its fix. Real conditions
where they are cheap (a shallow clone made with git, a closed port, a missing key file); dictionaries
for the engine's answers, which are pure data."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from gate.cli import doctor
from gate.cli.doctorchecks import (
    Finding,
    Status,
    disk_finding,
    engine_findings,
    git_findings,
    host_userns_finding,
    redis_findings,
    registry_finding,
    sign_key_finding,
)
from gate.core.errors import RET_HARNESS, RET_OK
from gate.io.keys import write_new_key

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e.invalid"}
GOOD_VERSION = {"Version": "20.10.24+dfsg1", "ApiVersion": "1.41"}
GOOD_INFO = {"SecurityOptions": ["name=seccomp,profile=default"], "Driver": "overlay2"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV)


def two_commits(repo: Path) -> Path:
    repo.mkdir()
    git(repo, "init", "-q")
    for n in (1, 2):
        (repo / "f.txt").write_text(str(n))
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{n}")
    return repo


def failing(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status is Status.FAIL]


def test_a_good_engine_passes_every_engine_check() -> None:
    """Docker 20.10 with seccomp, no AppArmor and overlay2: every engine line is ok."""
    found = engine_findings(GOOD_VERSION, GOOD_INFO)
    assert [f.status for f in found] == [Status.OK] * 4
    assert "20.10.24" in found[0].detail


@pytest.mark.parametrize(
    ("version", "info", "check", "fix_word"),
    [
        ({"Version": "19.03.2"}, GOOD_INFO, "docker engine", "upgrade"),
        (GOOD_VERSION, {"SecurityOptions": [], "Driver": "overlay2"}, "seccomp", "seccomp"),
    ],
)
def test_an_engine_that_cannot_sandbox_fails_with_its_fix(version: dict, info: dict, check: str, fix_word: str) -> None:
    """An old engine, or one without seccomp, is a failing line naming what to do."""
    (bad,) = failing(engine_findings(version, info))
    assert bad.check == check and fix_word in bad.fix


def test_apparmor_and_another_storage_driver_warn_without_failing() -> None:
    """AppArmor confinement and a non-overlay driver cost speed only: warnings, each with a fix."""
    info = {"SecurityOptions": ["name=seccomp,profile=default", "name=apparmor"], "Driver": "vfs"}
    found = engine_findings(GOOD_VERSION, info)
    warned = {f.check: f for f in found if f.status is Status.WARN}
    assert set(warned) == {"apparmor", "storage driver"} and all(f.fix for f in warned.values())
    assert not failing(found)


def test_a_kernel_without_user_namespaces_warns(tmp_path: Path) -> None:
    """user.max_user_namespaces=0 (a /proc tree as the kernel shows it) is a warning naming the setting."""
    (tmp_path / "sys" / "user").mkdir(parents=True)
    (tmp_path / "sys" / "user" / "max_user_namespaces").write_text("0\n")
    found = host_userns_finding(tmp_path)
    assert found.status is Status.WARN and "max_user_namespaces=0" in found.detail and found.fix


def test_a_shallow_clone_fails_the_history_check_with_the_unshallow_fix(tmp_path: Path) -> None:
    """A clone made with --depth 1 fails "git history", and the fix says to fetch the full history."""
    origin = two_commits(tmp_path / "origin")
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(tmp_path / "shallow")],
        check=True,
        capture_output=True,
    )
    (bad, *rest) = failing(git_findings(tmp_path / "shallow", "HEAD~1"))
    assert bad.check == "git history" and "shallow" in bad.detail and "--unshallow" in bad.fix
    assert [f.check for f in rest] == ["git base"]  # HEAD~1 is not in a depth-1 clone either


def test_a_full_clone_with_its_base_passes(tmp_path: Path) -> None:
    """Two commits, full history, base HEAD~1: every git line is ok."""
    found = git_findings(two_commits(tmp_path / "repo"), "HEAD~1")
    assert [f.status for f in found] == [Status.OK] * 3


def test_a_folder_outside_git_fails_with_the_fix(tmp_path: Path) -> None:
    """A folder that is no git repository is one failing line saying to run in a repository."""
    (only,) = git_findings(tmp_path, None)
    assert only.status is Status.FAIL and "not in a git repository" in only.detail and "git init" in only.fix


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_redis_on_a_closed_port_fails_without_echoing_the_password() -> None:
    """A books URL to a closed port is one failing line naming host and port (never the password) and the fix."""
    port = closed_port()
    (bad,) = redis_findings("books", f"redis://:s3cret@127.0.0.1:{port}/0", timeout_s=1)
    assert bad.status is Status.FAIL and f"127.0.0.1:{port}" in bad.detail and "unreachable" in bad.detail
    assert "s3cret" not in bad.detail + bad.fix and "redis-server" in bad.fix


def test_plain_redis_to_another_machine_fails_the_tls_check() -> None:
    """redis:// to a host off this machine fails "tls" with the rediss:// fix (and is unreachable here too)."""
    found = redis_findings("broker", "redis://192.0.2.1:6379/0", timeout_s=0.2)  # TEST-NET-1: never answers
    tls = next(f for f in found if f.check.endswith("tls"))
    assert tls.status is Status.FAIL and "rediss://" in tls.fix


def test_a_missing_signing_key_fails_and_a_real_one_passes(tmp_path: Path) -> None:
    """A named key file that does not exist fails with `gate keys new`; a key written by it passes with its id."""
    bad = sign_key_finding(tmp_path / "card.key")
    assert bad.status is Status.FAIL and "gate keys new" in bad.fix
    key = write_new_key(tmp_path / "card.key")
    good = sign_key_finding(tmp_path / "card.key")
    assert good.status is Status.OK and key.key_id in good.detail


def test_a_missing_or_empty_worker_registry_fails(tmp_path: Path) -> None:
    """A named registry that is absent, or enrols no active worker, fails with the enrol command as fix."""
    missing = registry_finding(tmp_path / "workers.json")
    (tmp_path / "empty.json").write_text(json.dumps({"version": 1, "workers": []}))
    empty = registry_finding(tmp_path / "empty.json")
    for found in (missing, empty):
        assert found.status is Status.FAIL and "gate workers enrol" in found.fix


def test_too_little_disk_fails(tmp_path: Path) -> None:
    """Less free space than work copies need is a failing line with the fix; enough is ok."""
    bad = disk_finding(tmp_path, need=2**62)
    assert bad.status is Status.FAIL and "free" in bad.detail and "TMPDIR" in bad.fix
    assert disk_finding(tmp_path, need=1).status is Status.OK


def args(**given: object) -> argparse.Namespace:
    return argparse.Namespace(**{"json": False, **given})


FINDINGS = [
    Finding("docker engine", Status.OK, "reachable"),
    Finding("apparmor", Status.WARN, "confines mounts", "see docs"),
    Finding("sandbox image", Status.FAIL, "probegate/sandbox-python:trixie-1 is not on this engine", "gate setup"),
]


def test_each_finding_is_one_line_and_a_failure_exits_non_zero(monkeypatch, capsys) -> None:
    """Lines: one per finding, a failing one carrying its fix after an arrow; a summary; exit 2."""
    monkeypatch.setattr(doctor, "collect", lambda _args: FINDINGS)
    assert doctor.run_doctor(args()) == RET_HARNESS
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(FINDINGS) + 1
    assert lines[2].startswith("FAIL  sandbox image") and lines[2].endswith("-> gate setup")
    assert lines[-1] == "gate doctor: 1 problem(s)"


def test_warnings_alone_exit_zero_and_json_has_every_check(monkeypatch, capsys) -> None:
    """Without a failure the doctor exits 0; --json lists every check with its status and fix."""
    monkeypatch.setattr(doctor, "collect", lambda _args: FINDINGS[:2])
    assert doctor.run_doctor(args(json=True)) == RET_OK
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is True
    assert [row["status"] for row in document["checks"]] == ["ok", "warn"]
    assert document["checks"][1]["fix"] == "see docs"
