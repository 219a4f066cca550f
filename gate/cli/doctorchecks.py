"""The checks `gate doctor` runs, one function per thing the gate needs. Each returns findings: one
line each, with what to do when it does not hold. A check never raises for what it finds wrong."""

from __future__ import annotations

import enum
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gate.core.errors import GateError

MIN_ENGINE = (20, 10)  # the oldest engine the suite runs on (Debian 12's docker.io)
MIN_FREE_BYTES = 2 * 1024**3  # work copies of a tree per trial, project image builds, the evidence store
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Status(enum.Enum):
    OK = "ok"
    WARN = "warn"  # works, with a cost or a weaker guarantee; does not fail the doctor
    FAIL = "fail"  # the gate cannot run as configured: the doctor exits non-zero


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str = ""

    def row(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status.value, "detail": self.detail, "fix": self.fix}


def engine_findings(version: dict[str, Any], info: dict[str, Any]) -> list[Finding]:
    """What `docker version` and `docker info` say about the engine: its version, seccomp, AppArmor,
    the storage driver and whether overlay work copies are possible."""
    from worker.host.workcopy import engine_refusal

    found = []
    text = str(version.get("Version") or "unknown")
    numbers = tuple(int(part) for part in text.split("+")[0].split(".")[:2] if part.isdigit())
    if len(numbers) == 2 and numbers >= MIN_ENGINE:
        found.append(Finding("docker engine", Status.OK, f"reachable, version {text}, API {version.get('ApiVersion')}"))
    else:
        found.append(
            Finding(
                "docker engine",
                Status.FAIL,
                f"version {text} is older than {'.'.join(map(str, MIN_ENGINE))}",
                "upgrade the Docker engine",
            )
        )
    options = [str(option) for option in info.get("SecurityOptions") or []]
    names = {option.split(",")[0].removeprefix("name=") for option in options}
    if "seccomp" in names:
        found.append(Finding("seccomp", Status.OK, "the engine filters system calls (every sandbox gets a profile)"))
    else:
        found.append(
            Finding(
                "seccomp",
                Status.FAIL,
                "the engine has no seccomp support: sandboxes would run without a syscall filter",
                "use a Docker engine built with seccomp (Debian's docker.io is) on a kernel with CONFIG_SECCOMP",
            )
        )
    apparmor = engine_refusal(options)
    if apparmor:
        found.append(
            Finding(
                "apparmor",
                Status.WARN,
                f"{apparmor}: work copies fall back to copy mode",
                "see docs/reference/doctor.md",
            )
        )
    else:
        found.append(Finding("apparmor", Status.OK, "not confining containers' mounts (overlay work copies possible)"))
    driver = str(info.get("Driver") or "unknown")
    if driver in ("overlay2", "overlayfs"):
        found.append(Finding("storage driver", Status.OK, driver))
    else:
        found.append(
            Finding(
                "storage driver",
                Status.WARN,
                f"{driver}: images and containers are slower to create than on overlay2",
                "configure the engine's storage-driver to overlay2 (/etc/docker/daemon.json)",
            )
        )
    if any(name == "userns" for name in names):
        found.append(Finding("engine user namespace", Status.OK, "userns-remap on: container root is not host root"))
    return found


def host_userns_finding(proc: Path = Path("/proc")) -> Finding:
    """Whether this kernel gives the sandbox's supervisor the user and mount namespaces overlay work copies need."""
    from worker.host.workcopy import host_refusal

    refused = host_refusal(proc)
    if refused:
        return Finding(
            "user namespaces",
            Status.WARN,
            f"{refused}: work copies fall back to copy mode (slower, same verdicts)",
            "enable unprivileged user namespaces and overlayfs (docs/reference/doctor.md)",
        )
    return Finding("user namespaces", Status.OK, "unprivileged user namespaces and overlayfs available")


def redis_findings(name: str, url: str, *, timeout_s: float = 2.0) -> list[Finding]:
    """A configured Redis (the broker or the books): reachable, as whom (ACL), and over TLS when not loopback.
    The URL is shown without its password."""
    import redis

    parts = urlsplit(url)
    where = f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}{parts.path or '/0'}"
    check = f"redis ({name})"
    tls = parts.scheme == "rediss"
    found = []
    if not tls and (parts.hostname or "") not in LOOPBACK:
        found.append(
            Finding(
                f"{check} tls",
                Status.FAIL,
                f"{where} is plain redis:// to another machine: its password and every batch cross in clear",
                "use rediss:// (Redis with TLS) for any broker or books off this machine",
            )
        )
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        return [*found, Finding(check, Status.FAIL, f"{where} refused the credentials: {exc}", "fix the user/password")]
    except (redis.RedisError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [
            *found,
            Finding(
                check,
                Status.FAIL,
                f"{where} unreachable: {reason}",
                "start redis-server, or fix the host, port and password in the URL",
            ),
        ]
    finally:
        client.close()
    try:
        user = client.acl_whoami()
    except redis.RedisError:
        user = "default (no ACL support)"
    found.append(Finding(check, Status.OK, f"{where} answers, connected as {user}" + (", TLS" if tls else "")))
    if user == "default" and (parts.hostname or "") not in LOOPBACK:
        found.append(
            Finding(
                f"{check} acl",
                Status.WARN,
                "connected as Redis's default user: every worker sharing it can touch every key",
                "give each worker its own ACL user (gate workers enrol --admin, docs/how-to/fleet.md)",
            )
        )
    return found


def sign_key_finding(path: Path) -> Finding:
    """A named card-signing key: readable, private, an Ed25519 key."""
    from gate.io.keys import load_signing_key

    try:
        key = load_signing_key(path)
    except GateError as exc:
        return Finding("signing key", Status.FAIL, str(exc), f"create one with `gate keys new {path}`")
    return Finding("signing key", Status.OK, f"{path}: key id {key.key_id}")


def registry_finding(path: Path) -> Finding:
    """A named worker registry: present and well-formed; how many workers it enrols."""
    from gate.io.workers import load_roster

    try:
        roster = load_roster(path)
    except GateError as exc:
        return Finding(
            "worker registry",
            Status.FAIL,
            str(exc),
            "enrol workers with `gate workers enrol PUBKEY --name NAME --workers FILE` (docs/how-to/fleet.md)",
        )
    active = sum(1 for worker in roster.workers if worker.active)
    if not active:
        return Finding(
            "worker registry",
            Status.FAIL,
            f"{path} enrols no active worker: a run over the broker would take no result",
            "enrol a worker with `gate workers enrol PUBKEY --name NAME` (docs/how-to/fleet.md)",
        )
    return Finding("worker registry", Status.OK, f"{path}: {active} active worker(s), {len(roster.workers)} in all")


def disk_finding(path: Path, *, need: int = MIN_FREE_BYTES) -> Finding:
    """Free space where work copies and the card's evidence are written."""
    try:
        free = shutil.disk_usage(path).free
    except OSError as exc:
        return Finding("disk space", Status.FAIL, f"cannot read {path}: {exc.strerror}", "check the path exists")
    gib = free / 1024**3
    if free < need:
        return Finding(
            "disk space",
            Status.FAIL,
            f"{gib:.1f} GiB free under {path}, under the {need / 1024**3:.0f} GiB work copies need",
            "free disk space there, or point TMPDIR at a larger disk",
        )
    return Finding("disk space", Status.OK, f"{gib:.1f} GiB free under {path}")


def git_findings(repo: Path, base: str | None) -> list[Finding]:
    """The repository the gate runs in: a git work tree, with full history, and the base revision present."""

    def git(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True, check=False)

    if shutil.which("git") is None:
        return [Finding("git", Status.FAIL, "git is not on PATH", "install git (apt-get install git)")]
    top = git("rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return [
            Finding("git", Status.FAIL, f"{repo} is not in a git repository", "run gate in your repository (git init)")
        ]
    found = [Finding("git", Status.OK, f"repository {top.stdout.strip()}")]
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        found.append(
            Finding(
                "git history",
                Status.FAIL,
                "shallow clone: the base commit may be missing and `--base` cannot be trusted to find it",
                "git fetch --unshallow (in GitHub Actions: actions/checkout with fetch-depth: 0)",
            )
        )
    else:
        found.append(Finding("git history", Status.OK, "full history (not shallow)"))
    rev = base or "HEAD"
    resolved = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if resolved.returncode != 0:
        fix = "commit first (git commit)" if base is None else f"fetch {base}, or name a commit that exists"
        found.append(Finding("git base", Status.FAIL, f"{rev} is no commit here", fix))
    else:
        found.append(Finding("git base", Status.OK, f"{rev} is {resolved.stdout.strip()[:12]}"))
    return found
