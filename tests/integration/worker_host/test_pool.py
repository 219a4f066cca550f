"""The standing pool (gate pool serve) on the real engine: containers ready before any run, runs that
take them give the same observations, each container serves one run and is removed after it, a
pooled container is locked down like a fresh one, and a killed pool's containers are swept."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from conftest import MemoryInputs, build_tree
from gate_runs import gate_run
from support.paths import INVOICE as EXAMPLE

from gate.core.suite.trial import ClockSpec, Limits, Observation, TrialSpec
from gate.core.testing import make_spec
from worker.host.pool import LABEL_POOL, PoolServer
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import sweep

pytestmark = pytest.mark.integration

GATE = Path(sys.executable).with_name("gate")
CLOCK = ClockSpec(frozen_at="2026-03-01T00:00:00Z")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short private dir: a unix socket's path must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="pg-pool-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def pool(docker_client: docker.DockerClient, sandbox_image: str, short_dir: Path) -> Iterator[PoolServer]:
    """A pool of two containers of the default shape, ready; stopped (and checked empty) afterwards."""
    server = PoolServer(short_dir / "pool.sock", size=2, client=docker_client)
    server.start()
    server.want(sandbox_image, Limits(), DockerSandbox(client=docker_client).work_copy()[0])
    assert server.wait_full(60), "the pool never filled"
    yield server
    server.stop()
    # A refill still starting a container when stop() gave up on it (a loaded engine) removes it when the start
    # returns: wait for that, not only for stop() (seen once in CI: one container listed just after stop()).
    assert wait_until(lambda: pool_containers(docker_client, server.path) == [], timeout=60), pool_containers(
        docker_client, server.path
    )


def pool_containers(client: docker.DockerClient, path: Path) -> list:
    return client.containers.list(all=True, filters={"label": f"{LABEL_POOL}={path}"}, sparse=True)


def wait_until(check, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def specs_for(run_id: str, inputs: MemoryInputs, tree: Path, count: int = 1, fixture: bytes = b"{}") -> list[TrialSpec]:
    tree_digest, fixture_digest = inputs.add_tree(tree), inputs.add_fixture(fixture)
    return [
        make_spec(
            index,
            run_id=run_id,
            property_id="prop.pool",
            tree_digest=tree_digest,
            fixture_path="fixtures/input.json",
            fixture_digest=fixture_digest,
            deadline_s=10.0,
            clock=CLOCK,
            canary="canary-for-the-pool-test",
        )
        for index in range(count)
    ]


def one_run(sandbox: DockerSandbox, specs: list[TrialSpec], inputs: MemoryInputs) -> list[Observation]:
    """A whole run as the local executor drives it: open, prestart, the batch, close."""
    run_id = specs[0].run_id
    sandbox.open(run_id)
    sandbox.prestart(run_id, specs[0].limits, 1)
    try:
        return sandbox.run_batch(specs, inputs)
    finally:
        sandbox.close(run_id)


HOSTNAME_PROBE = """
    import json, socket, sys
    sys.stdin.read()
    print(json.dumps({"host": socket.gethostname()}))
"""

KINDS_PROBES = {
    "passes": 'import json, sys\nprint(json.dumps({"n": len(sys.stdin.read())}))\n',
    "writes": 'open("made.txt", "w").write("x")\nopen("probe.py", "a").write("#")\nprint("{}")\n',
    "fails": "import sys\nsys.exit(3)\n",
    "leaks": 'import os\nprint(os.environ["API_TOKEN"])\n',
    "clock": "import time\nprint(int(time.time()))\n",
}


def test_pool_holds_started_containers_and_stop_leaves_none(docker_client, pool: PoolServer):
    """The pool starts its containers before any run, labelled with its pid; stop removes them all."""
    held = pool_containers(docker_client, pool.path)
    assert len(held) == 2
    for container in held:
        container.reload()
        assert container.status == "running"
        assert container.labels["probegate.pid"] == str(os.getpid())


def test_a_run_from_the_pool_observes_what_a_fresh_container_does(docker_client, pool: PoolServer, tmp_path, run_id):
    """Every kind of trial (pass, writes, exit code, leaked canary, frozen clock) is observed alike from a
    pooled container and a fresh one, and the pooled run really ran in a container the pool had started."""
    ready = {c.id[:12] for c in pool_containers(docker_client, pool.path)}
    seen: dict[str, list[tuple]] = {}
    for way, option in (("pool", pool.path), ("fresh", "off")):
        sandbox = DockerSandbox(client=docker_client, worker_id="pytest", pool=option)
        for name, probe in KINDS_PROBES.items():
            inputs = MemoryInputs()
            specs = specs_for(f"{run_id}-{way}-{name}", inputs, build_tree(tmp_path / way / name, probe))
            [obs] = one_run(sandbox, specs, inputs)
            assert obs.fault is None, obs.fault
            writes = tuple((w.path, w.change) for w in obs.writes)
            seen.setdefault(name, []).append((obs.exit_code, obs.canary_seen, writes, obs.stdout.data, obs.work_copy))
            sweep(docker_client, specs[0].run_id)
        pool.wait_full(60)
    for name, (pooled, fresh) in seen.items():
        assert pooled == fresh, name
    inputs = MemoryInputs()
    specs = specs_for(f"{run_id}-host", inputs, build_tree(tmp_path / "host", HOSTNAME_PROBE))
    ready = {c.id[:12] for c in pool_containers(docker_client, pool.path)}
    [obs] = one_run(DockerSandbox(client=docker_client, worker_id="pytest", pool=pool.path), specs, inputs)
    assert json.loads(obs.stdout.data)["host"] in ready


def test_a_pooled_container_is_locked_down_like_a_fresh_one(docker_client, pool: PoolServer, run_id):
    """Seccomp, capabilities, user, network, read-only root and mounts, limits: a pooled container's
    settings equal those of the container a run makes for itself."""
    sandbox = DockerSandbox(client=docker_client, worker_id="pytest", pool="off")
    fresh = sandbox._containers._create(run_id, Limits(), sandbox.image_id(), "prop", 0)
    try:
        [pooled] = pool_containers(docker_client, pool.path)[:1]
        pooled.reload()
        mine = docker_client.containers.get(fresh.container.id)

        def lockdown(container) -> dict:
            host, config = container.attrs["HostConfig"], container.attrs["Config"]
            keys = ("SecurityOpt", "CapDrop", "CapAdd", "ReadonlyRootfs", "NetworkMode", "Privileged", "PidsLimit")
            keys += ("Memory", "MemorySwap", "NanoCpus", "Ulimits", "Tmpfs", "ShmSize", "Devices")
            mounts = sorted((m["Target"], m["ReadOnly"], m["Type"]) for m in host["Mounts"])
            command = config["Cmd"][:-2]  # all but the idle timeout and mode: pooled ones wait longer
            said = {"User": config["User"], "NetworkDisabled": config.get("NetworkDisabled")}
            return {**{k: host.get(k) for k in keys}, **said, "mounts": mounts, "cmd": command}

        assert lockdown(pooled) == lockdown(mine)
        assert pooled.attrs["Config"]["Cmd"][-1] == mine.attrs["Config"]["Cmd"][-1]  # the same work copy mode
        assert lockdown(pooled)["User"] == "65534:65534" and lockdown(pooled)["NetworkMode"] == "none"
        assert lockdown(pooled)["NetworkDisabled"] is True  # no network sandbox at all, only loopback
    finally:
        fresh.remove()


SNOOP_PROBE = """
    import json, os, socket, sys
    targets = json.loads(sys.stdin.read())
    found, reached = [], []
    for top, dirs, files in os.walk("/"):
        if top in ("/proc", "/sys", "/dev"):
            dirs[:] = []
            continue
        found += [os.path.join(top, f) for f in files if "secret-of-run-b" in f]
    for path in targets:
        try:
            os.listdir(path) if os.path.isdir(path) else open(path).read()
            reached.append(path)
        except OSError:
            pass
    writable = []
    for path in ("/src/planted.txt", "/opt/probegate/in/batch-9.json", "/opt/probegate/lower/x"):
        try:
            open(path, "w").write("left for a later run")
            writable.append(path)
        except OSError:
            pass
    print(json.dumps({"found": found, "reached": reached, "writable": writable, "host": socket.gethostname()}))
"""


def test_a_run_cannot_reach_another_slot_or_a_later_runs_tree(docker_client, pool: PoolServer, tmp_path, run_id):
    """Adversarial: while run B holds a pooled container bound to its tree, run A's probe in another
    pooled container finds neither B's tree nor B's or the pool's host dirs, and can leave nothing in its
    own mounts; after A closes its container is gone, and a later run C gets another one."""
    b_run, a_run, c_run = f"{run_id}-b", f"{run_id}-a", f"{run_id}-c"
    sandbox = DockerSandbox(client=docker_client, worker_id="pytest", pool=pool.path)
    inputs = MemoryInputs()
    b_tree = build_tree(tmp_path / "b", HOSTNAME_PROBE, {"secret-of-run-b.txt": "b's secret"})
    b_specs = specs_for(b_run, inputs, b_tree)
    sandbox.open(b_run)
    sandbox.prestart(b_run, Limits(), 1)
    try:
        [b_obs] = sandbox.run_batch(b_specs, inputs)  # B's container stays warm, bound to B's tree
        assert b_obs.fault is None, b_obs.fault
        slots = [p for p in Path(pool._dir.name).iterdir() if (p / "src" / "secret-of-run-b.txt").exists()]
        assert slots, f"run B got no pooled container: {sandbox._containers.pool_note}"
        b_slot = slots[0]
        targets = [str(b_slot), str(b_slot / "src" / "secret-of-run-b.txt"), pool._dir.name, str(b_tree)]
        a_tree = build_tree(tmp_path / "a", SNOOP_PROBE)
        a_specs = specs_for(a_run, inputs, a_tree, fixture=json.dumps(targets).encode())
        [a_obs] = one_run(sandbox, a_specs, inputs)
    finally:
        sandbox.close(b_run)
    assert a_obs.fault is None and a_obs.exit_code == 0, (a_obs.fault, a_obs.stderr.data)
    seen = json.loads(a_obs.stdout.data)
    assert seen["found"] == [] and seen["reached"] == [] and seen["writable"] == [], seen
    a_host, b_host = seen["host"], json.loads(b_obs.stdout.data)["host"]
    assert a_host != b_host
    gone = wait_until(lambda: not docker_client.containers.list(all=True, filters={"id": a_host}, sparse=True))
    assert gone, "A's container remains"
    pool.wait_full(60)
    c_specs = specs_for(c_run, inputs, build_tree(tmp_path / "c", HOSTNAME_PROBE))
    [c_obs] = one_run(sandbox, c_specs, inputs)
    assert json.loads(c_obs.stdout.data)["host"] not in (a_host, b_host)


# Serial: the killed pool's containers are a dead process's, which any concurrent `gate run` sweeps at its
# start (sweep_dead_workers), before this test sees that the pool left them.
@pytest.mark.serial
def test_a_killed_pools_containers_are_swept(docker_client, sandbox_image: str, short_dir: Path):
    """`gate pool serve` killed outright leaves its containers; `gate sweep` (dead processes) removes them,
    and one stopped by SIGTERM removes its own."""
    path = short_dir / "pool.sock"
    for how in ("kill", "term"):
        serve = [str(GATE), "pool", "serve", "--socket", str(path), "--size", "1"]
        proc = subprocess.Popen(serve, stderr=subprocess.PIPE)
        try:
            assert wait_until(lambda: len(pool_containers(docker_client, path)) == 1, 60), "the pool started nothing"
            if how == "kill":
                proc.kill()
                proc.wait(timeout=10)
                assert pool_containers(docker_client, path), "a killed pool removed its containers itself?"
                swept = subprocess.run([str(GATE), "sweep"], capture_output=True, text=True, timeout=60)
                assert swept.returncode == 0, swept.stderr
                assert pool_containers(docker_client, path) == [], swept.stdout
            else:
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        assert pool_containers(docker_client, path) == []


def running(client: docker.DockerClient, path: Path) -> bool:
    listed = client.containers.list(filters={"label": f"{LABEL_POOL}={path}"}, sparse=True)
    return [c.status for c in listed] == ["running"]


def test_a_run_whose_pool_died_removes_what_it_took(docker_client, sandbox_image, short_dir: Path, tmp_path, run_id):
    """A pool killed while a run holds its container cannot remove it: the run's close then does."""
    path = short_dir / "pool.sock"
    serve = [str(GATE), "pool", "serve", "--socket", str(path), "--size", "1"]
    proc = subprocess.Popen(serve, stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: running(docker_client, path), 60), "the pool started nothing"
        sandbox = DockerSandbox(client=docker_client, worker_id="pytest", pool=path)
        inputs = MemoryInputs()
        tree = build_tree(tmp_path / "tree", HOSTNAME_PROBE)
        # Running is not yet ready: the pool lists a container as ready just after its start returns, which
        # nothing outside the pool can see, and a run that finds none ready starts its own. So runs are
        # tried until one holds the pool's container (a run that got none leaves it in the pool).
        give_up = time.monotonic() + 30
        for attempt in itertools.count():
            held = f"{run_id}-{attempt}"
            specs = specs_for(held, inputs, tree)
            sandbox.open(held)
            sandbox.prestart(held, Limits(), 1)
            [obs] = sandbox.run_batch(specs, inputs)
            host = json.loads(obs.stdout.data)["host"]
            if [c.id[:12] for c in pool_containers(docker_client, path)] == [host]:
                break
            sandbox.close(held)
            assert time.monotonic() < give_up, (
                f"no run got the pool's container in 30 s: {sandbox._containers.pool_note}"
            )
        proc.kill()
        proc.wait(timeout=10)
        sandbox.close(held)
        assert pool_containers(docker_client, path) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        subprocess.run([str(GATE), "sweep"], capture_output=True, timeout=60)


def test_gate_run_from_the_pool_gives_the_examples_kinds(docker_client, pool: PoolServer, tmp_path: Path):
    """`gate run` with PROBEGATE_POOL takes its containers from the pool and judges the example's patches
    as without it (kinds as docs/reference/examples.md lists them), leaving no pooled container of the run behind."""
    env = {**os.environ, "PROBEGATE_POOL": str(pool.path)}
    before = pool.started_total
    expected = {"good": {"pass"}, "leaks_token": {"fail_safety", "pass"}, "unsafe_write": {"fail_safety", "pass"}}
    for patch, kinds in expected.items():
        pool.wait_full(60)
        run = gate_run(EXAMPLE, patch, tmp_path / patch / "card.json", env=env, new_ledger=True)
        assert set(run.kinds().values()) == kinds, (patch, run.stderr)
    assert pool.started_total > before, "no run took a container from the pool"
    assert wait_until(lambda: len(pool_containers(docker_client, pool.path)) <= pool.size)
