"""Trials across processes: real redis-server, real `gate-worker serve` processes, real Docker.

The same inputs give the same card through Celery as through the local pool; a worker SIGKILLed
mid-batch costs a redelivery, never a double count; a broker restart is waited out and what it lost
sent again; no worker at all ends as harness_error (exit 2), never as a false pass.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gate_runs import EXAMPLE, PATCHES, UNENROLLED, ExampleRuns, gate_run, seeds_for
from run_containers import containers_of, gone_within
from support.servers import RedisServer, Workers, enrol

from gate.core.errors import RET_HARNESS
from worker.host.sweep import sweep_dead_workers

pytestmark = pytest.mark.integration

SLOW_PROBE = """import json, sys, time
json.load(sys.stdin)
time.sleep(1.0)
print(json.dumps({"tool": "issue_refund"}))
"""

# Enough one-second trials for batches queued behind the one in flight when a worker or the broker is lost.
SLOW_TRIALS = 6

SLOW_SUITE = """[suite]
probe = "python3 probe.py"
fixtures = "fixtures"
checks = "checks.py"

[[property]]
id = "slow_tool_choice"
band = "statistical"
fixture = "tools/refund-query.json"
check = "checks:tool_choice"
deadline_s = 5.0
trials = {trials}
min_hits = {trials}
"""


@pytest.fixture
def slow_suite(tmp_path: Path) -> Path:
    """A suite of one statistical property whose probe takes a second per trial."""
    root = tmp_path / "slow"
    shutil.copytree(EXAMPLE / "fixtures", root / "fixtures")
    shutil.copy(EXAMPLE / "checks.py", root / "checks.py")
    (root / "patch").mkdir()
    (root / "patch" / "probe.py").write_text(SLOW_PROBE)
    (root / "gate.toml").write_text(SLOW_SUITE.format(trials=SLOW_TRIALS))
    shutil.copy(EXAMPLE / ".fixture-seal", root / ".fixture-seal")
    return root


def run_slow(root: Path, card: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-m",
        "gate.cli",
        "run",
        "--suite",
        str(root / "gate.toml"),
        "--workdir",
        str(root / "patch"),
        "--seal",
        str(root / ".fixture-seal"),
        "--card",
        str(card),
        "--new-ledger",  # every slow run is the first on the ledger beside its card
        *(() if "--workers" in extra else (UNENROLLED,)),  # else its workers are the test's own, on loopback
        *extra,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def rows(card: dict) -> dict[str, tuple[str, int, int]]:
    return {r["id"]: (r["kind"], r["hits"], r["trials"]) for r in card["properties"]}


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory, docker_client, sandbox_image: str) -> Iterator[Workers]:
    """Two gate-workers on a private broker, shared by the module's per-patch comparisons: one takes its
    containers from a standing pool of its own (`--pool own`), the other starts them per run, so every patch's
    batches meet both paths."""
    tmp = tmp_path_factory.mktemp("two-workers")
    server = RedisServer(tmp)
    server.start()
    pool = Workers(server.url, tmp)
    pool.start("w1", "--pool", "own")
    pool.start("w2")
    pool.wait_ready()
    yield pool
    pool.stop_all()
    sweep_dead_workers(docker_client)
    server.stop()


@pytest.mark.xdist_group("celery_two_workers")  # one xdist worker: the module's fleet starts once per CI run
@pytest.mark.parametrize("patch", PATCHES)
def test_celery_gives_the_local_card(
    two_workers: Workers, example_runs: ExampleRuns, patch: str, tmp_path: Path
) -> None:
    """Each example patch earns the same kinds and hit counts through two workers as through the local pool (the
    noisy sampler from the same replayed seeds, so the very same hits)."""
    local = example_runs.get(patch)
    remote = gate_run(
        EXAMPLE, patch, tmp_path / "card.json", "--broker", two_workers.url, UNENROLLED, *seeds_for(patch),
        new_ledger=True,
    )  # fmt: skip
    assert rows(remote.card) == rows(local.card)
    assert (remote.code, remote.accept) == (local.code, local.accept)
    if remote.card["properties"][0]["trials"]:  # drift runs no trial, so no image is seen
        assert remote.card["image_id"] == local.card["image_id"]


def test_sigkilled_worker_costs_a_redelivery_not_a_double_count(
    workers: Workers, redis_server: RedisServer, slow_suite: Path, tmp_path: Path, docker_client
) -> None:
    """SIGKILL one of two workers mid-batch: the run completes, each trial counted once, the redelivery on the card."""
    workers.start("w1")
    workers.start("w2")
    workers.wait_ready()
    card = tmp_path / "card.json"
    proc = run_slow(slow_suite, card, "--broker", redis_server.url, env={**workers.env})
    workers.wait_busy("w1", docker_client)  # a probe container of w1 runs: it holds an unacknowledged batch
    workers.kill("w1")
    _, stderr = proc.communicate(timeout=180)
    stamped = json.loads(card.read_text())
    assert proc.returncode == 0, (stderr, stamped["properties"], stamped["harness_events"])
    assert rows(stamped) == {"slow_tool_choice": ("pass", SLOW_TRIALS, SLOW_TRIALS)}
    assert "redelivery" in {e["kind"] for e in stamped["harness_events"]}
    assert stamped["retry_count"] == 0
    # The dead worker may have left its trial's container; a sweep (as at worker start) finds it by pid.
    sweep_dead_workers(docker_client)
    assert gone_within(containers_of(docker_client, stamped["run_id"]), 5.0) is not None


def test_broker_restart_mid_run_waits_republishes_and_completes(
    workers: Workers, redis_server: RedisServer, slow_suite: Path, tmp_path: Path, docker_client
) -> None:
    """Restarting redis-server (losing every queued batch, blob and result) mid-run, in the secure default (an
    enrolled worker under its own broker user, which the broker's ACL file keeps): the run says on stderr that
    it waits, the worker logs in again, what was lost is sent again, and every trial passes."""
    suite = slow_suite / "gate.toml"  # no credit to draw: a harness fault would fail the job at once
    suite.write_text(suite.read_text().replace('checks = "checks.py"', 'checks = "checks.py"\nledger = { budget = 0 }'))
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "w1", admin=redis_server.url)
    workers.start("w1")
    workers.wait_ready()
    card = tmp_path / "card.json"
    # One enrolled worker: nobody to replay its statistical trials on, which leaves the row unable to pass
    # (gate.run.replays); this test is about the restart, so the replays are off.
    enrolled = ("--workers", str(registry), "--cross-check", "0")
    proc = run_slow(
        slow_suite, card, "--broker", redis_server.url, *enrolled, "--result-timeout", "60", env={**workers.env}
    )
    workers.wait_busy("w1", docker_client)  # mid-run: batches are queued and one is in flight
    with redis_server.down():  # the kill drops every connection and every queued batch; then it comes back
        pass
    _, stderr = proc.communicate(timeout=180)
    stamped = json.loads(card.read_text())
    said = "\n".join([stderr[-4000:], json.dumps(stamped["properties"]), json.dumps(stamped["harness_events"])])
    assert proc.returncode == 0, said  # a string, shown whole (a tuple's repr is cut short)
    assert rows(stamped) == {"slow_tool_choice": ("pass", SLOW_TRIALS, SLOW_TRIALS)}
    assert set(stamped["properties"][0]["workers"]) == {"box-w1"}  # its results, signed, after logging in again
    assert "the broker restarted and lost what it held" in stderr, stderr[-3000:]
    assert "broker_restarted" in {e["kind"] for e in stamped["harness_events"]}


def test_no_worker_is_a_harness_error_not_a_hang(redis_server: RedisServer, slow_suite: Path, tmp_path: Path) -> None:
    """With no worker on the queue, the run stops after --worker-wait with harness_error and exit 2."""
    suite = slow_suite / "gate.toml"
    suite.write_text(
        suite.read_text()
        .replace('band = "statistical"', 'band = "safety"')
        .replace(f"trials = {SLOW_TRIALS}\nmin_hits = {SLOW_TRIALS}\n", "")
    )
    proc = run_slow(slow_suite, tmp_path / "card.json", "--broker", redis_server.url, "--worker-wait", "2")
    # A hang is the run waiting out its result timeout (minutes) instead: communicate() would raise.
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == RET_HARNESS, stderr
    stamped = json.loads((tmp_path / "card.json").read_text())
    assert stamped["properties"][0]["kind"] == "harness_error"
    assert "no gate-worker answered on queue probegate.trials within 2s" in stamped["properties"][0]["detail"]
