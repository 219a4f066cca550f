"""`gate doctor`: whether this machine can run the gate as configured, one line per check with what
to do when it fails: the Docker engine, the sandbox and project images and their preflight (the
frozen clock, the closed network), a configured Redis, a named signing key and worker registry,
disk space, the git base. Exit 0 only when nothing fails; `--json` for machines.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

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
from gate.cli.settings import ENV_REGISTRY, SIGN_KEY_ENV, GateSettings, registry_named, registry_of, settings_of
from gate.core.errors import RET_HARNESS, RET_OK, GateError
from gate.io.cliargs import REDIS_SCHEMES
from gate.io.envsettings import rows

if TYPE_CHECKING:
    from gate.io.hostsettings import HostSettings


def add_doctor_parser(sub: argparse._SubParsersAction) -> None:
    doctor = sub.add_parser("doctor", help="check this machine can run the gate: one line per check, with the fix")
    doctor.set_defaults(handler="gate.cli.doctor:run_doctor")
    doctor.add_argument("--json", action="store_true", help="one JSON document instead of lines")
    doctor.add_argument("--repo", type=Path, default=Path("."), help="the repository to gate (default .)")
    doctor.add_argument("--base", metavar="GIT_REV", help="the base revision runs will name (checked to exist)")
    doctor.add_argument("--suite", type=Path, help="suite file whose project image to check (default REPO/gate.toml)")
    doctor.add_argument("--broker", help="broker URL (default $PROBEGATE_BROKER)")
    doctor.add_argument("--ledger", help="books URL (default $PROBEGATE_LEDGER)")
    doctor.add_argument("--workers", type=Path, help=f"worker registry to check (default ${ENV_REGISTRY})")
    doctor.add_argument("--sign-key", type=Path, help=f"card-signing key to check (default ${SIGN_KEY_ENV})")


def run_doctor(args: argparse.Namespace) -> int:
    """Run every check, print them, exit 0 when none failed, else 2 (the harness cannot run)."""
    findings = collect(args)
    failed = [f for f in findings if f.status is Status.FAIL]
    if args.json:
        settings = rows(GateSettings, settings_of(args))
        print(json.dumps({"ok": not failed, "checks": [f.row() for f in findings], "settings": settings}, indent=2))
    else:
        width = max(len(f.check) for f in findings)
        for f in findings:
            mark = {Status.OK: "ok  ", Status.WARN: "warn", Status.FAIL: "FAIL"}[f.status]
            print(f"{mark}  {f.check:<{width}}  {f.detail}" + (f"  -> {f.fix}" if f.fix else ""))
        print(f"gate doctor: {len(failed)} problem(s)" if failed else f"gate doctor: all {len(findings)} checks pass")
    return RET_HARNESS if failed else RET_OK


def collect(args: argparse.Namespace) -> list[Finding]:
    """Every finding, in the order a fix is best made (the engine before the images on it)."""
    findings = _docker_findings(args)
    settings = settings_of(args)
    broker = args.broker or settings.broker
    for name, url in (("broker", broker), ("books", args.ledger or settings.ledger)):
        if url and url.startswith(REDIS_SCHEMES):
            findings += redis_findings(name, url)
    key = args.sign_key or settings.sign_key
    if key is not None:
        findings.append(sign_key_finding(key))
    registry = registry_of(args) if registry_named(args) else None
    if registry is None and broker and (args.repo / ".probegate" / "workers.json").exists():
        registry = args.repo / ".probegate" / "workers.json"
    if registry is not None:
        findings.append(registry_finding(registry))
    findings.append(disk_finding(Path(tempfile.gettempdir())))
    findings += git_findings(args.repo, args.base)
    return findings


def _docker_findings(args: argparse.Namespace) -> list[Finding]:
    from worker.host.engine import docker_client, engine_call

    try:
        client = docker_client()
        with engine_call("asking the engine for its version and info"):
            version, info = client.version(), client.info()
    except GateError as exc:
        return [
            Finding(
                "docker engine",
                Status.FAIL,
                str(exc),
                "start the Docker engine and let this user use it (docs/how-to/install.md)",
            )
        ]
    findings = [*engine_findings(version, info), host_userns_finding()]
    sandbox = _sandbox_findings(client, settings_of(args).host)
    findings += sandbox
    if all(f.status is not Status.FAIL for f in sandbox):
        findings += _project_findings(client, args)
    return findings


def _sandbox_findings(client: object, host: HostSettings) -> list[Finding]:
    """The sandbox image: present and as defined, then the preflight inside it (clock, network, namespaces)."""
    from worker.host.engine import DEFAULT_IMAGE
    from worker.host.imagesetup import check_present
    from worker.host.preflight import INSTANT, preflight
    from worker.host.sandboxes.docker import DockerSandbox

    try:
        found = check_present(client, DEFAULT_IMAGE)  # type: ignore[arg-type]
    except GateError as exc:
        return [Finding("sandbox image", Status.FAIL, str(exc), "gate setup --force")]
    if found is None:
        return [
            Finding(
                "sandbox image",
                Status.FAIL,
                f"{DEFAULT_IMAGE} is not on this engine",
                "gate setup (docs/how-to/install.md)",
            )
        ]
    findings = [Finding("sandbox image", Status.OK, found.line())]
    try:
        result = preflight(DockerSandbox(client, image=DEFAULT_IMAGE, host=host))  # type: ignore[arg-type]
    except GateError as exc:
        fix = "gate setup --force rebuilds the image; docs/reference/doctor.md lists each preflight finding"
        return [*findings, Finding("preflight", Status.FAIL, str(exc), fix)]
    copy = result.get("work_copy")
    note = f" ({result['work_copy_note']})" if result.get("work_copy_note") else ""
    findings.append(
        Finding("frozen clock", Status.OK, f"probes (and a child without LD_PRELOAD) read {INSTANT.isoformat()}")
    )
    findings.append(
        Finding("preflight", Status.OK, f"network closed, no namespaces for probes; work copies: {copy}{note}")
    )
    return findings


def _project_findings(client: object, args: argparse.Namespace) -> list[Finding]:
    """The suite's project image, when its gate.toml names one: built, and passing the preflight."""
    suite = args.suite or args.repo / "gate.toml"
    if not suite.is_file():
        return []
    from gate.io.suite import load_suite
    from worker.host.engine import DEFAULT_IMAGE
    from worker.host.images import ProjectImageMissing, project_image
    from worker.host.preflight import prove_image

    try:
        source = load_suite(suite).image_source()
    except GateError as exc:
        return [Finding("suite", Status.FAIL, str(exc), "fix gate.toml (docs/reference/suite.md)")]
    if source is None:
        return [Finding("project image", Status.OK, f"{suite} names none: trials run in the sandbox image")]
    try:
        image_id = project_image(client, source, base=DEFAULT_IMAGE, build=False)  # type: ignore[arg-type]
        prove_image(client, image_id)  # type: ignore[arg-type]
    except ProjectImageMissing as exc:
        # `gate run` builds it before the first trial: a cost, not a failure.
        fix = f"gate image build --suite {suite} builds it now (docs/how-to/images.md)"
        return [Finding("project image", Status.WARN, f"{exc}; the first gate run builds it", fix)]
    except GateError as exc:
        fix = f"gate image build --suite {suite} (gate run builds it too; docs/how-to/images.md)"
        return [Finding("project image", Status.FAIL, str(exc), fix)]
    return [Finding("project image", Status.OK, f"{image_id[:19]} from {source.label}, preflight passes")]
