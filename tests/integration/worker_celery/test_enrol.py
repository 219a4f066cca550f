"""Enrolled workers against real redis-server and real workers: results are taken only when signed by
an enrolled, unrevoked key over the batch the coordinator issued; each worker's own ACL user can be
revoked alone and cannot touch the books, the blob store or the other users.

The stand-in worker (standin_worker.py) fabricates passing observations without running anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from gate_runs import UNENROLLED
from support.paths import INTEGRATION
from support.servers import RedisServer, Workers

from gate.cli.main import main as gate_main
from gate.core.errors import RET_CONFIG
from gate.core.suite.trial import Observation
from gate.core.testing import make_specs
from gate.io.keys import write_new_key
from gate.io.snapshot import LocalInputs
from gate.io.workers import load_roster
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.app import direct_queue
from worker.celery.shared.results import result_key

pytestmark = pytest.mark.integration
HERE = INTEGRATION  # the stand-in workers' modules
CELERY = [sys.executable, "-m", "celery", "-A", "standin_worker", "worker", "--without-gossip", "--without-mingle"]


class Fleet(Workers):
    """Workers plus stand-ins, all on one broker; `admin` is the broker's default (unrestricted) user."""

    def standin(
        self, name: str, mode: str, *, key: Path | None = None, claim: str | None = None, steal: tuple[str, ...] = ()
    ) -> None:
        """Start a stand-in worker that fabricates passing observations, signed as `mode` says; it also consumes
        the direct queues of the key ids in `steal` (as a worker whose broker user can read any queue could)."""
        env = {
            **self.env,
            "PROBEGATE_BROKER": self.urls.get(name, self.url),
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            "STANDIN_MODE": mode,
            **({"STANDIN_KEY": str(key)} if key else {}),
            **({"STANDIN_CLAIM": claim} if claim else {}),
        }
        log = (self.tmp / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(
            [
                *CELERY,
                "-Q",
                ",".join(["probegate.trials", *map(direct_queue, steal)]),
                "-c",
                "1",
                "-n",
                f"{name}@%h",
                "--loglevel",
                "INFO",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=self.tmp,
        )

    def stop(self, name: str) -> None:
        self.kill(name)
        del self.procs[name]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fleet(broker: RedisServer, tmp_path: Path) -> Iterator[Fleet]:
    pool = Fleet(broker.url, tmp_path, env={"PROBEGATE_VISIBILITY_TIMEOUT": "30"})
    yield pool
    pool.stop_all()


def gate(*argv: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    """Run `gate` in this process; the JSON lines it printed (exit 0 asserted)."""
    capsys.readouterr()
    code = gate_main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def public_key(fleet: Fleet, name: str) -> Path:
    """The public half of worker `name`'s key, created as its first start would."""
    if not fleet.key(name).exists():
        write_new_key(fleet.key(name))
    return fleet.key(name).with_name(fleet.key(name).name + ".pub")


def run_trials(broker: RedisServer, tmp: Path, registry: Path | None, n: int = 12, *, executor=None):
    """Send `n` trivial trials through a CeleryExecutor checking `registry`; (observations, executor)."""
    tree = tmp / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "probe.py").write_text("print('{}')\n")
    fixture = b"{}"
    digest = hashlib.sha256(fixture).hexdigest()
    if executor is None:
        enrolled = (lambda: load_roster(registry)) if registry else None
        # Room 0: every batch sent at once and no straggler copied, so a slow machine adds no copy's late
        # answer to the events these tests expect empty (or holding only a refusal).
        executor = CeleryExecutor(
            broker.url, worker_wait_s=30, result_timeout_s=90, batch_size=3, enrolled=enrolled, room_per_process=0
        )
    with LocalInputs(tree, {digest: fixture}) as inputs:
        specs = make_specs(n, run_id="enrol", tree_digest=inputs.tree_digest, fixture_digest=digest)
        seen = {o.key: o for o in executor.run(specs, inputs)}
    assert len(seen) == n
    return list(seen.values()), executor


def refused(observations: list[Observation], executor: CeleryExecutor, kind: str) -> None:
    """Every trial is a harness fault (none passes), and the refusal is a harness event of `kind` (beside
    `one_worker`: the stand-in took one enrolled worker's queue, so every batch was assigned to that one)."""
    assert all(o.fault is not None and o.exit_code is None for o in observations), observations[0]
    assert all(f"({kind})" in (o.fault or "") for o in observations), observations[0].fault
    assert {e.kind for e in executor.events} - {"one_worker"} == {kind}, executor.events


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        ("unsigned", "unsigned_result"),
        ("sign", "unknown_worker_key"),
        ("claim", "forged_result"),
        ("other_batch", "unissued_batch"),
        ("other_spec", "replayed_result"),
        ("enrolled", "unassigned_signer"),
    ],
)
def test_standin_results_are_refused(
    mode: str, kind: str, fleet: Fleet, broker: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stand-in that takes the enrolled worker's batches off its direct queue and fabricates passes is refused
    whether unsigned, signed by an unknown key, claiming the enrolled key, signed by the enrolled key for a batch
    id or spec the coordinator did not issue, or validly signed by another enrolled worker's key."""
    registry = tmp_path / "workers.json"
    for name in ("honest", "rogue") if mode == "enrolled" else ("honest",):
        gate(
            "workers", "enrol", str(public_key(fleet, name)), "--name", name, "--workers", str(registry), capsys=capsys
        )
    enrolled_key, own_key = fleet.key("honest"), public_key(fleet, "rogue").with_suffix("")
    key = enrolled_key if mode in ("other_batch", "other_spec") else own_key
    honest = load_roster(registry).by_name("honest")
    assert honest is not None
    claim = honest.key_id if mode == "claim" else None
    fleet.standin("standin", "sign" if mode == "enrolled" else mode, key=key, claim=claim, steal=(honest.key_id,))
    fleet.wait_ready()
    observations, executor = run_trials(broker, tmp_path, registry)
    refused(observations, executor, kind)


def test_without_a_registry_the_standin_would_pass(fleet: Fleet, broker: RedisServer, tmp_path: Path) -> None:
    """The attack the registry stops: with no registry the stand-in's fabricated clean exits are taken."""
    fleet.standin("standin", "unsigned")
    fleet.wait_ready()
    observations, _ = run_trials(broker, tmp_path, None)
    assert all(o.fault is None and o.exit_code == 0 and o.worker_id == "honest-box" for o in observations)


def test_honest_workers_accepted_revoked_refused(
    fleet: Fleet, broker: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Enrolled gate-workers' results count under their enrolled names; once revoked, a worker is assigned no
    batch, and a result signed by its key (here a stand-in's, off the other's queue) is refused."""
    registry = tmp_path / "workers.json"
    for name in ("w1", "w2"):
        gate(
            "workers",
            "enrol",
            str(public_key(fleet, name)),
            "--name",
            f"box-{name}",
            "--workers",
            str(registry),
            capsys=capsys,
        )
        fleet.start(name, "--sandbox", "stub")
    fleet.wait_ready()
    observations, executor = run_trials(broker, tmp_path, registry)
    assert all(o.fault is None and o.exit_code == 0 for o in observations)
    assert {o.worker_id for o in observations} <= {"box-w1", "box-w2"}  # never the worker's own word
    assert executor.events == []
    gate("workers", "revoke", "box-w1", "--workers", str(registry), capsys=capsys)
    observations, executor = run_trials(broker, tmp_path, registry, executor=executor)
    assert all(o.fault is None and o.worker_id == "box-w2" for o in observations)  # w1 still up, given nothing
    executor.events.clear()
    w2 = load_roster(registry).by_name("box-w2")
    assert w2 is not None
    fleet.stop("w2")
    fleet.standin("standin", "sign", key=fleet.key("w1"), steal=(w2.key_id,))
    fleet.wait_ready()
    observations, executor = run_trials(broker, tmp_path, registry, executor=executor)
    refused(observations, executor, "revoked_worker")


def test_a_replayed_signed_result_is_refused(
    fleet: Fleet, broker: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An enrolled worker's genuine signed result, copied by a stand-in into another batch's answer, is refused."""
    registry = tmp_path / "workers.json"
    gate("workers", "enrol", str(public_key(fleet, "w1")), "--name", "box1", "--workers", str(registry), capsys=capsys)
    fleet.start("w1", "--sandbox", "stub")
    fleet.wait_ready()
    observations, executor = run_trials(broker, tmp_path, registry, n=3)
    assert all(o.fault is None for o in observations)
    w1 = load_roster(registry).by_name("box1")
    assert w1 is not None
    fleet.stop("w1")
    fleet.standin("standin", "replay", steal=(w1.key_id,))
    fleet.wait_ready()
    observations, executor = run_trials(broker, tmp_path, registry, executor=executor)
    refused(observations, executor, "replayed_result")


def test_per_worker_acl_users(
    fleet: Fleet,
    broker: RedisServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    docker_client,
    sandbox_image: str,
) -> None:
    """Each worker runs under its own ACL user (one in Docker, fetching blobs), consuming its own direct queue
    alone; both users are saved to the broker's ACL file; revoking one closes its connections, bars it and
    deletes it from the file, the other keeps working; neither can write the
    books, blobs or users, take, fill or delete the other's queue, or write any result but its own."""
    registry, admin = tmp_path / "workers.json", broker.url
    for name in ("w1", "w2"):
        row = gate(
            "workers", "enrol", str(public_key(fleet, name)), "--name", name,
            "--workers", str(registry), "--redis-admin-url", admin, capsys=capsys,
        )[0]  # fmt: skip
        assert row["acl_user"] == f"probegate-worker-{name}"
        fleet.urls[name] = row["broker_url"]
    assert all(f"user probegate-worker-{n} on " in broker.acl_file().read_text() for n in ("w1", "w2"))  # saved
    fleet.start("w1", "--sandbox", "stub")
    fleet.start("w2")  # the Docker sandbox: it fetches the tree and fixture from the blob store
    fleet.control_url = admin
    fleet.wait_ready(timeout=120)
    # Every batch sent at once round the two (`--room 0`): w1 has no sandbox to wait on, and dealt by room it
    # would take over w2's batches; this test needs each worker's user to fetch, answer and write its results.
    executor = CeleryExecutor(
        broker.url, worker_wait_s=30, result_timeout_s=90, batch_size=3, enrolled=lambda: load_roster(registry),
        room_per_process=0,
    )  # fmt: skip
    observations, executor = run_trials(broker, tmp_path, registry, executor=executor)
    assert all(o.fault is None and o.exit_code == 0 for o in observations), observations
    assert {o.worker_id for o in observations} == {"w1", "w2"}
    # The rules denied nothing a worker needs: only each one's start-up question whether it may take from the
    # shared queue (it may not, so it consumes its own direct queue alone).
    log = redis.Redis.from_url(admin).execute_command("ACL", "LOG")
    assert {(e[b"username"], e[b"object"], b"cmd=llen" in e[b"client-info"]) for e in log} == {
        (b"probegate-worker-w1", b"probegate.trials", True),
        (b"probegate-worker-w2", b"probegate.trials", True),
    }, log
    assert "consuming it alone" in (tmp_path / "w1.log").read_text()

    roster = load_roster(registry)
    own, other = (direct_queue(w.key_id) for w in (roster.by_name("w1"), roster.by_name("w2")) if w is not None)
    w1 = redis.Redis.from_url(fleet.urls["w1"])
    w1.ping()
    assert w1.llen(own) == 0 and w1.set(result_key("mine", own), "{}")  # its own queue and results
    denied = [
        ("RPUSH", other, "{}"),  # another worker's direct queue: no batch slipped in front of its own
        ("LPUSH", other + "\x06\x163", "{}"),  # nor into its priority lists
        ("DEL", other),  # nor its batches thrown away
        ("BRPOP", other, "1"),  # nor taken
        ("LPUSH", "probegate.trials", "{}"),  # the shared queue, which no enrolled run uses
        ("SET", result_key("t1", other), "{}"),  # another worker's result
        ("SET", result_key("t1", "probegate.trials"), "{}"),  # a result under the plain key
        ("PUBLISH", result_key("t1", other), "{}"),  # another worker's result channel
        ("HSET", "unacked", "tag", "{}"),  # kombu's shared unacked bookkeeping
        ("HSET", other + ".unacked", "tag", "{}"),  # another worker's own
        ("SADD", "_kombu.binding." + other, "x"),  # another worker's routing
        ("SREM", "_kombu.binding." + other, "x"),
        ("SADD", "_kombu.binding_permanent." + other, "x"),
        ("SET", "probegate:books:invoice", "{}"),  # the books
        ("SET", "probegate:workers", "{}"),  # where a registry in Redis would live
        ("SET", "probegate:blob:" + "0" * 64, "x"),  # the blob store is read-only
        ("SET", "probegate:name:tree:x", "y"),
        ("ACL", "SETUSER", "probegate-worker-w2", "off"),  # another worker's user
        ("ACL", "SETUSER", "probegate-worker-w1", "+@all", "~*"),  # its own rights
        ("CLIENT", "KILL", "USER", "probegate-worker-w2"),
        ("CONFIG", "SET", "requirepass", "x"),
        ("FLUSHALL",),
        ("KEYS", "*"),
        ("MONITOR",),
        ("PUBLISH", "/0.celery.pidbox", "{}"),  # a control broadcast to every worker (shutdown, revoke)
    ]
    for command in denied:
        with pytest.raises(redis.exceptions.NoPermissionError):
            w1.execute_command(*command)
    assert w1.get("probegate:blob:" + "0" * 64) is None  # reading the blob store is allowed
    w1.close()

    row = gate("workers", "revoke", "w1", "--workers", str(registry), "--redis-admin-url", admin, capsys=capsys)[0]
    assert row["state"] == "revoked" and row["connections_closed"] >= 1
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(fleet.urls["w1"]).ping()
    # Saved too: a restart loads the ACL file, and the revoked user must not come back with it.
    assert "probegate-worker-w1 " not in broker.acl_file().read_text()
    observations, executor = run_trials(broker, tmp_path, registry, executor=executor)
    assert all(o.fault is None and o.exit_code == 0 and o.worker_id == "w2" for o in observations), observations
    shutil.rmtree(tmp_path / "tree", ignore_errors=True)


def test_a_confined_worker_killed_mid_batch_gets_its_batch_back(
    broker: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client, sandbox_image: str
) -> None:
    """A worker under its own ACL user takes its batches without acknowledgements (no bookkeeping of its own,
    none in kombu's shared `unacked`): SIGKILLed mid-batch, it loses the batch, and once it is back the
    coordinator sees its new boot id in its heartbeat and sends it the batch again, which it answers well
    within the run's result timeout."""
    from worker.host.sweep import sweep_dead_workers

    registry = tmp_path / "workers.json"
    pool = Fleet(broker.url, tmp_path, env={"PROBEGATE_VISIBILITY_TIMEOUT": "8"}, control_url=broker.url)
    try:
        row = gate(
            "workers", "enrol", str(public_key(pool, "w1")), "--name", "w1",
            "--workers", str(registry), "--redis-admin-url", broker.url, capsys=capsys,
        )[0]  # fmt: skip
        pool.urls["w1"] = row["broker_url"]
        pool.start("w1")
        pool.wait_ready(timeout=120)
        own = direct_queue(load_roster(registry).workers[0].key_id)
        (tmp_path / "tree").mkdir()
        (tmp_path / "tree" / "probe.py").write_text("import time\ntime.sleep(3)\nprint('{}')\n")
        fixture = b"{}"
        digest = hashlib.sha256(fixture).hexdigest()
        executor = CeleryExecutor(
            broker.url, worker_wait_s=30, result_timeout_s=150, visibility_timeout_s=8, batch_size=3,
            enrolled=lambda: load_roster(registry),
        )  # fmt: skip
        seen: list[Observation] = []
        with LocalInputs(tmp_path / "tree", {digest: fixture}) as inputs:
            # One trial: a batch of one is held, restored and answered like any other, and its 3 s probe
            # runs once more after the restart instead of three times.
            specs = make_specs(1, run_id="confined", tree_digest=inputs.tree_digest, fixture_digest=digest,
                               deadline_s=10.0)  # fmt: skip
            running = threading.Thread(target=lambda: seen.extend(executor.run(specs, inputs)), daemon=True)
            running.start()
            pool.wait_busy("w1", docker_client)  # its probe runs: it holds the batch unacknowledged
            pool.kill("w1")
            admin = redis.Redis.from_url(broker.url)
            assert not admin.exists(own + ".unacked") and not admin.exists("unacked")
            killed = time.monotonic()
            pool.start("w1")
            running.join(timeout=240)
        assert not running.is_alive() and time.monotonic() - killed < 120
        assert len(seen) == 1 and all(o.fault is None and o.worker_id == "w1" for o in seen), seen
        assert "worker_restarted" in {e.kind for e in executor.events}, executor.events
        assert not admin.exists(own + ".unacked")
        # Taking and answering its batches needed nothing the rules deny (only the start-up question).
        log = admin.execute_command("ACL", "LOG")
        assert {(e[b"object"], b"cmd=llen" in e[b"client-info"]) for e in log} == {(b"probegate.trials", True)}, log
    finally:
        pool.stop_all()
        sweep_dead_workers(docker_client)


HOSTILE_PROBE = """import json, os, sys
json.load(sys.stdin)
print(json.dumps({"token": os.environ.get("API_TOKEN", "")}))
with open("escaped.txt", "w") as out:  # the write map allows out/ only
    out.write("outside the map")
"""

SAFETY_SUITE = """[suite]
probe = "python3 probe.py"
fixtures = "fixtures"
checks = "checks.py"

[[property]]
id = "no_unmapped_write"
band = "safety"
fixture = "a.json"
check = "builtin:no_unmapped_write"
deadline_s = 5.0
params = { write_map = ["out", "out/*"] }

[[property]]
id = "no_secret_in_output"
band = "safety"
fixture = "a.json"
check = "builtin:no_secret_in_output"
deadline_s = 5.0
"""


def run_argv(root: Path, card: Path, broker: RedisServer, *extra: str) -> list[str]:
    """`gate run` of the hostile suite's patch over the broker, writing `card`."""
    oracle = ["--suite", str(root / "gate.toml"), "--workdir", str(root / "patch"), "--seal", str(root / "seal")]
    return [
        sys.executable,
        "-m",
        "gate.cli",
        "run",
        *oracle,
        "--card",
        str(card),
        "--new-ledger",
        "--broker",
        broker.url,
        *extra,
    ]


def accept_exit(root: Path, card: Path, *told: str) -> int:
    """`gate accept` of `card` (its oracle unchecked: the suite has no base), given `told`, in the suite's folder."""
    oracle = ["--suite", str(root / "gate.toml"), "--workdir", str(root / "patch"), "--seal", str(root / "seal")]
    argv = [sys.executable, "-P", "-m", "gate.cli", "accept", "--card", str(card), *oracle, "--allow-unchecked-oracle"]
    argv += told
    return subprocess.run(argv, capture_output=True, timeout=60, cwd=root).returncode


def safety_run(root: Path, card: Path, broker: RedisServer, *extra: str) -> tuple[int, dict, int]:
    """`gate run` of the hostile patch over the broker, then `gate accept`, both in the suite's folder, where
    no default registry lies; (run exit, card, accept exit)."""
    done = subprocess.run(run_argv(root, card, broker, *extra), capture_output=True, text=True, timeout=300, cwd=root)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(card.read_text()), accept_exit(root, card)


def hostile_suite(root: Path) -> Path:
    """A suite of two safety properties over a patch that writes outside its map and prints its canary."""
    (root / "fixtures").mkdir(parents=True)
    (root / "fixtures" / "a.json").write_text("{}\n")
    (root / "fixtures" / "clock.json").write_text('{"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}\n')
    (root / "gate.toml").write_text(SAFETY_SUITE)
    (root / "checks.py").write_text("")
    (root / "patch").mkdir()
    (root / "patch" / "probe.py").write_text(HOSTILE_PROBE)
    assert gate_main(["seal", str(root / "fixtures"), "--write", str(root / "seal")]) == 0
    return root


def test_gate_run_with_enrolled_workers_catches_the_patch(
    fleet: Fleet, broker: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client, sandbox_image
) -> None:
    """`gate run --workers` over an enrolled gate-worker in Docker: its signed results count, and the
    patch's unmapped write and leaked canary fail both safety properties (exit 1, not accepted). Adversarial:
    a worker up on the same broker but outside the registry is never sent a cross-check (its results could not
    count, so the trial would stay unproven by luck): with no other enrolled worker, none is made."""
    root = hostile_suite(tmp_path / "suite")
    registry = tmp_path / "workers.json"
    gate("workers", "enrol", str(public_key(fleet, "w1")), "--name", "box1", "--workers", str(registry), capsys=capsys)
    fleet.start("w1")
    fleet.start("stray")  # a key of its own, never enrolled
    fleet.wait_ready(timeout=120)
    code, card, accepted = safety_run(
        root, tmp_path / "card.json", broker, "--workers", str(registry), "--cross-check", "1"
    )
    assert code == 1 and accepted != 0
    assert {row["id"]: row["kind"] for row in card["properties"]} == {
        "no_unmapped_write": "fail_safety",
        "no_secret_in_output": "fail_safety",
    }
    events = [(event["kind"], event["property_id"]) for event in card["harness_events"]]
    refusals = {"unsigned_result", "unknown_worker_key", "revoked_worker", "forged_result", "replayed_result"}
    assert not refusals & {kind for kind, _ in events}, events
    assert ("no_cross_check_worker", "no_unmapped_write") in events, events
    assert card["cross_check"]["replays_checked"] == 0, card["cross_check"]


def test_a_run_without_a_registry_refuses_to_start(broker: RedisServer, tmp_path: Path) -> None:
    """Secure by default: `gate run --broker` with no registry exits 65 at once, in one line saying how to
    enrol workers, and writes no card."""
    root = hostile_suite(tmp_path / "suite")
    card = tmp_path / "card.json"
    done = subprocess.run(run_argv(root, card, broker), capture_output=True, text=True, timeout=60, cwd=root)
    assert done.returncode == RET_CONFIG and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "no worker registry" in line and "gate workers enrol" in line and UNENROLLED in line
    assert not card.exists()


def test_gate_run_refuses_an_unsigned_standin(
    fleet: Fleet, broker: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gate run --workers`: a stand-in passing a patch that writes outside its map and prints its canary is
    accepted only where results are not checked, and only when both the run and accept are told so; with a
    registry the run ends as harness_error and is not accepted."""
    root = hostile_suite(tmp_path / "suite")
    registry = tmp_path / "workers.json"
    gate("workers", "enrol", str(public_key(fleet, "w1")), "--name", "box1", "--workers", str(registry), capsys=capsys)
    fleet.standin("standin", "unsigned", steal=(load_roster(registry).workers[0].key_id,))
    fleet.wait_ready()

    code, card, accepted = safety_run(root, tmp_path / "open" / "card.json", broker, UNENROLLED)
    assert (code, card["unenrolled_workers"], accepted) == (0, True, 1)  # the stand-in passed it; accept refuses
    assert accept_exit(root, tmp_path / "open" / "card.json", UNENROLLED) == 0  # what it buys where allowed
    code, card, accepted = safety_run(root, tmp_path / "enrolled" / "card.json", broker, "--workers", str(registry))
    assert code == 2 and accepted != 0
    assert {row["kind"] for row in card["properties"]} == {"harness_error"}
    assert "unsigned_result" in {event["kind"] for event in card["harness_events"]}
