"""The deploy files of the one-command join (deploy/probegate-admit.service, probegate-worker.service,
cloud-init.yaml, ephemeral-workers.yml): the admission and the join run the commands the parsers accept, and no
admin URL, broker password or join token is ever written into a command's arguments by the files themselves."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT

from gate.cli.arguments import build_parser
from worker.celery.worker.cli import WorkerSettings
from worker.celery.worker.cli import build_parser as worker_parser

DEPLOY = ROOT / "deploy"
GATE = "/opt/probegate/.venv/bin/gate"
GATE_WORKER = "/opt/probegate/.venv/bin/gate-worker"
BROKER_FILE = "/var/lib/probegate/broker.json"


def unit(name: str) -> list[str]:
    """The lines of the systemd unit `name`, comments left out."""
    return [ln for ln in (DEPLOY / name).read_text().splitlines() if ln and not ln.startswith("#")]


def settings(lines: list[str], key: str) -> list[str]:
    """Every value of `key=` in a unit's lines, in order."""
    return [ln.split("=", 1)[1] for ln in lines if ln.startswith(f"{key}=")]


def load_yaml(path: Path) -> Any:
    """`path` parsed as YAML (PyYAML, safe loader)."""
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with the dev extra (MkDocs needs it)")
    return yaml.safe_load(path.read_text())


def bootstrap() -> str:
    """The bootstrap script cloud-init.yaml writes and runs."""
    config = load_yaml(DEPLOY / "cloud-init.yaml")
    (script,) = [f["content"] for f in config["write_files"] if f["path"] == "/usr/local/sbin/probegate-bootstrap"]
    assert config["runcmd"] == [["/usr/local/sbin/probegate-bootstrap"]]
    return script


def workflow() -> dict[Any, Any]:
    """The ephemeral workers' workflow, parsed."""
    return load_yaml(DEPLOY / "ephemeral-workers.yml")


def steps(flow: dict[Any, Any]) -> list[dict[str, Any]]:
    """Every step of every job of `flow`."""
    return [step for job in flow["jobs"].values() for step in job["steps"]]


def test_the_admit_unit_runs_the_admission_with_its_admin_url_from_an_environment_file() -> None:
    """The admit unit's ExecStart is `gate workers admit`, which the gate's parser accepts, with no admin URL or
    registry among its arguments: both come from a required EnvironmentFile under /etc/probegate."""
    lines = unit("probegate-admit.service")
    (exec_start,) = settings(lines, "ExecStart")
    command = shlex.split(exec_start)
    assert command == [GATE, "workers", "admit"]
    args = build_parser().parse_args(command[1:])
    assert (args.command, args.action, args.once) == ("workers", "admit", False)
    assert "redis" not in exec_start and "--workers" not in exec_start
    (env_file,) = settings(lines, "EnvironmentFile")
    assert env_file.startswith("/etc/probegate/") and not env_file.startswith("-")
    assert not any("PROBEGATE_REDIS_ADMIN" in value for value in settings(lines, "Environment"))


def test_the_admit_unit_restarts_on_failure_and_takes_a_signal_stop_as_clean() -> None:
    """It restarts on failure, runs as the coordinator's user with hardening, and `gate`'s exit 143 after
    SIGTERM is a clean stop, not a failure."""
    lines = unit("probegate-admit.service")
    assert settings(lines, "Restart") == ["on-failure"] and settings(lines, "User") == ["probegate"]
    assert "143" in settings(lines, "SuccessExitStatus")[0].split()
    for hardening in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes"):
        assert hardening in lines


def test_the_worker_unit_starts_from_a_broker_file_or_an_environment_file() -> None:
    """The worker unit starts when either the join's broker file or the hand-made worker.env exists (OR-ed
    conditions), points `serve` at that broker file, and puts no broker URL in its arguments."""
    lines = unit("probegate-worker.service")
    conditions = settings(lines, "ConditionPathExists")
    assert sorted(conditions) == sorted([f"|{BROKER_FILE}", "|/etc/probegate/worker.env"])
    assert settings(lines, "EnvironmentFile") == ["-/etc/probegate/worker.env"]
    assert f"PROBEGATE_BROKER_FILE={BROKER_FILE}" in settings(lines, "Environment")
    (exec_start,) = settings(lines, "ExecStart")
    command = shlex.split(exec_start)
    args = worker_parser(WorkerSettings.from_env({})).parse_args(command[1:])
    assert command[0] == GATE_WORKER and args.command == "serve" and "--broker" not in command


def test_cloud_init_writes_a_root_only_token_file_and_keeps_the_engine_without_a_bridge() -> None:
    """cloud-init.yaml parses as YAML; it writes the join token to a 0600 root file holding only a placeholder,
    and still runs dockerd with no bridge and no iptables rules."""
    text = (DEPLOY / "cloud-init.yaml").read_text()
    assert text.startswith("#cloud-config\n")
    files = {f["path"]: f for f in load_yaml(DEPLOY / "cloud-init.yaml")["write_files"]}
    token = files["/etc/probegate/join.env"]
    assert (token["owner"], token["permissions"]) == ("root:root", "0600")
    assert token["content"].strip() == "PROBEGATE_JOIN_TOKEN=CHANGE_ME"
    assert "--bridge=none --iptables=false" in files["/etc/systemd/system/docker.service.d/probegate.conf"]["content"]


def test_the_bootstrap_joins_once_with_gate_worker_join_and_never_enrols_by_hand() -> None:
    """The bootstrap is valid bash, joins with `gate-worker join TOKEN --no-serve` as the worker's user (a command
    line gate-worker's parser accepts), writes the broker file the worker unit reads, never calls `gate workers
    enrol`, and deletes the token file after the join."""
    script = bootstrap()
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    assert "gate workers enrol" not in script and "workers enrol" not in script
    joined = " ".join(script.replace("\\\n", " ").split())
    found = re.search(re.escape(GATE_WORKER) + r" join [^|;&\n]*?--wait \d+", joined)
    assert found is not None and "runuser -u probegate" in joined
    args = worker_parser(WorkerSettings.from_env({})).parse_args(shlex.split(found.group(0))[1:])
    assert (args.command, args.token, args.no_serve) == ("join", "$PROBEGATE_JOIN_TOKEN", True)
    assert 'PROBEGATE_BROKER_FILE="$STATE/broker.json"' in joined and "STATE=/var/lib/probegate" in script
    assert joined.index("gate-worker join") < joined.index("rm -f /etc/probegate/join.env")
    assert "systemctl start probegate-worker.service" in script


def test_the_workflow_takes_the_token_from_a_secret_through_the_environment_only() -> None:
    """Every step that needs the join token gets it through `env:` from `secrets.`; no `run:` script holds a
    `${{ … }}` expression, so neither the token nor an input is pasted into a shell line."""
    flow = workflow()
    with_token = [s for s in steps(flow) if "PROBEGATE_JOIN_TOKEN" in s.get("env", {})]
    assert with_token
    for step in with_token:
        assert step["env"]["PROBEGATE_JOIN_TOKEN"] == "${{ secrets.PROBEGATE_JOIN_TOKEN }}"
    for step in steps(flow):
        assert "${{" not in step.get("run", ""), step.get("name")


def test_the_workflow_runs_a_matrix_of_workers_that_stop_on_sigterm_at_the_budget() -> None:
    """workflow_dispatch takes `workers` (4) and `minutes` (30); the worker job is a fail-slow matrix over the plan
    job's JSON list on ubuntu-latest, and each joins and serves under `timeout --signal=TERM`, exit 124 counting
    as the normal end."""
    flow = workflow()
    inputs = flow.get("on", flow.get(True))["workflow_dispatch"]["inputs"]  # PyYAML reads a bare `on` as True
    assert (inputs["workers"]["default"], inputs["minutes"]["default"]) == (4, 30)
    job = flow["jobs"]["worker"]
    assert job["runs-on"] == "ubuntu-latest" and job["strategy"]["fail-fast"] is False
    assert job["strategy"]["matrix"]["worker"] == "${{ fromJSON(needs.plan.outputs.workers) }}"
    (serve,) = [s for s in job["steps"] if "timeout" in s.get("run", "")]
    run = serve["run"]
    assert re.search(r'timeout --signal=TERM --kill-after=\d+s "\$\{MINUTES\}m"', run)
    assert 'join "$PROBEGATE_JOIN_TOKEN" --concurrency 2' in " ".join(run.replace("\\\n", " ").split())
    (normal_end,) = [ln for ln in run.splitlines() if ln.strip().startswith("124)")]
    assert "exit" not in normal_end


def test_the_plan_job_makes_one_matrix_entry_per_worker(tmp_path: Path) -> None:
    """The plan step, run by bash, emits the JSON list [1..N] and a job limit above the budget, and refuses a
    worker count a matrix cannot hold."""
    (plan,) = workflow()["jobs"]["plan"]["steps"]
    out = tmp_path / "output"

    def run(workers: str, minutes: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "WORKERS": workers, "MINUTES": minutes, "GITHUB_OUTPUT": str(out)}
        return subprocess.run(["bash", "-e", "-c", plan["run"]], env=env, capture_output=True, text=True)

    assert run("3", "30").returncode == 0
    found = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert json.loads(found["workers"]) == [1, 2, 3] and int(found["job_minutes"]) > 30
    assert run("0", "30").returncode == 64 and run("257", "30").returncode == 64 and run("2", "x").returncode == 64


def test_ci_lint_validates_the_workflow_against_the_github_schema() -> None:
    """`.ci/run`'s lint checks the ephemeral workers' workflow with the same builtin schema as the scaffold's."""
    text = (ROOT / ".ci" / "run").read_text()
    lint = text[text.index("lint() {") : text.index("}", text.index("lint() {"))]
    assert "--builtin-schema vendor.github-workflows" in lint and "deploy/ephemeral-workers.yml" in lint
