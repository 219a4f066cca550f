"""DockerSandbox against the real engine and image: isolation, frozen clock, deadlines, writes, output."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time

import pytest

from gate.core.errors import SandboxError
from gate.core.suite.trial import Change, Limits, Observation
from worker.host.engine import DEFAULT_IMAGE
from worker.host.sandboxes.docker import DockerSandbox
from worker.host.sweep import LABEL_PID, LABEL_RUN, sweep

pytestmark = pytest.mark.integration

FROZEN_EPOCH = 1772323200.0  # 2026-03-01T00:00:00Z


def stdout_json(obs: Observation) -> dict:
    return json.loads(obs.stdout.data.decode().strip().splitlines()[-1])


@pytest.fixture(params=["overlay", "copy"])
def work_copy(request) -> str:
    """Every sandbox test runs in both work copy modes: copy-on-write overlays and the forced fallback."""
    return request.param


@pytest.fixture(autouse=True)
def _no_leftovers(request):
    """After every test that ran trials, no container of its run remains."""
    if "work_copy" not in request.fixturenames:
        yield  # no trial: nothing to leave, and no engine needed
        return
    leftovers = request.getfixturevalue("leftovers")
    yield
    assert leftovers() == [], "a container of this test's run remains"


def test_default_image_matches_tag_file():
    """DEFAULT_IMAGE names the tag the image definition (package data) builds."""
    from support.imagedef import definition_tag

    assert definition_tag() == DEFAULT_IMAGE


NETWORK_PROBE = """
    import json, socket, sys
    def attempt(action):
        try:
            return f"ok {action()}"
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
    port = int(sys.stdin.read())
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    print(json.dumps({
        "tcp_public": attempt(lambda: socket.create_connection(("1.1.1.1", 443), timeout=3)),
        "tcp_host_loopback": attempt(lambda: socket.create_connection(("127.0.0.1", port), timeout=3)),
        "dns": {n: attempt(lambda: socket.getaddrinfo(n, 443)) for n in ("example.com", "pypi.org")},
        "udp_public": attempt(lambda: udp.sendto(b"x", ("8.8.8.8", 53))),
    }))
"""


def test_network_is_unreachable_from_the_probe(observe, make_trial):
    """TCP to a public address and to a port listening on the host's loopback fail, and DNS resolves nothing."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from the host
        result = stdout_json(observe(*make_trial(NETWORK_PROBE, fixture=str(port).encode())))
    assert result["tcp_public"].startswith("OSError") and "unreachable" in result["tcp_public"]
    assert not result["tcp_host_loopback"].startswith("ok")
    assert all(not outcome.startswith("ok") for outcome in result["dns"].values()), result["dns"]
    assert "unreachable" in result["udp_public"]


CLOCK_PROBE = """
    import json, os, subprocess, sys, time
    scrubbed = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("FAKETIME")}
    child = subprocess.run([sys.executable, "-c", "import time; print(time.time())"],
                           env=scrubbed, capture_output=True, text=True, check=True)
    print(json.dumps({"now": time.time(), "child": float(child.stdout),
                      "local": time.strftime("%Y-%m-%d %H:%M")}))
"""


@pytest.mark.parametrize(("zone", "local"), [("UTC", "2026-03-01 00:00"), ("America/New_York", "2026-02-28 19:00")])
def test_wall_clock_is_frozen_for_the_probe_and_a_scrubbed_child(observe, make_trial, zone, local):
    """time.time() reads the frozen instant in any zone, in the probe and in a child without LD_PRELOAD/FAKETIME*."""
    assert abs(time.time() - FROZEN_EPOCH) > 3600  # the host clock is not the frozen one
    result = stdout_json(observe(*make_trial(CLOCK_PROBE, zone=zone)))
    assert abs(result["now"] - FROZEN_EPOCH) < 5 and abs(result["child"] - FROZEN_EPOCH) < 5
    assert result["local"] == local


SLEEP_PROBE = """
    import asyncio, json, threading, time
    t0 = time.monotonic(); time.sleep(0.2); slept = time.monotonic() - t0
    fired = threading.Event(); threading.Timer(0.1, fired.set).start(); timer = fired.wait(5)
    t1 = time.monotonic(); asyncio.run(asyncio.sleep(0.1)); aslept = time.monotonic() - t1
    print(json.dumps({"slept": slept, "timer": timer, "aslept": aslept}))
"""


def test_sleep_timer_and_asyncio_return_under_the_frozen_clock(observe, make_trial):
    """time.sleep, threading.Timer and asyncio.sleep complete in real time although wall time stands still."""
    obs = observe(*make_trial(SLEEP_PROBE, deadline_s=10))
    result = stdout_json(obs)
    assert not obs.timed_out and obs.exit_code == 0 and obs.duration_s < 5
    assert 0.19 <= result["slept"] < 2 and result["timer"] is True and 0.09 <= result["aslept"] < 2


STUBBORN_PROBE = """
    import signal, subprocess, sys
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\nwhile True: time.sleep(1)"
    subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    print("looping", flush=True)
    while True:
        pass
"""


# Serial: the kill must land within a second of the deadline, which a machine busy with parallel tests stretches.
@pytest.mark.serial
def test_probe_ignoring_sigterm_is_killed_at_its_deadline(observe, make_trial, leftovers):
    """A SIGTERM-ignoring busy loop (with a detached child) is SIGKILLed at 1 s and leaves no container."""
    started = time.monotonic()
    obs = observe(*make_trial(STUBBORN_PROBE, deadline_s=1.0))
    assert obs.timed_out and obs.signal == 9 and obs.exit_code is None
    assert 1.0 <= obs.duration_s < 2.0 and time.monotonic() - started < 6.0
    assert obs.stdout.data == b"looping\n"
    assert leftovers() == []


# Serial: deadline plus grace must be kept within seconds, which a machine busy with parallel tests stretches.
@pytest.mark.serial
def test_host_kills_a_container_whose_supervisor_hangs(docker_client, sandbox_image, make_trial, leftovers, tmp_path):
    """When the in-container supervisor never reports, the host kills and removes the container at deadline+grace."""
    hung = tmp_path / "hung_supervisor.py"
    hung.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    sandbox = DockerSandbox(client=docker_client, grace_s=1.0, supervisor=hung)
    spec, inputs = make_trial("print('never runs')\n", deadline_s=0.5)
    started = time.monotonic()
    [obs] = sandbox.run_batch([spec], inputs)
    wall = time.monotonic() - started
    assert obs.timed_out and obs.fault is None
    assert 1.5 <= obs.duration_s < 4.0 and wall < 6.0
    assert leftovers() == []


def test_orphan_holding_stdout_cannot_stall_the_trial(observe, make_trial):
    """A detached child that keeps the probe's stdout open is killed once the probe exits."""
    orphan = "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True)\nprint('bye')\n"
    started = time.monotonic()
    obs = observe(*make_trial(orphan, deadline_s=20))
    assert obs.exit_code == 0 and not obs.timed_out and obs.stdout.data == b"bye\n"
    assert time.monotonic() - started < 8


WRITES_PROBE = """
    import json, os, pathlib
    def append(target):
        try:
            with open(target, "a") as handle:
                return handle.write("x") and "written"
        except OSError as exc:
            return exc.strerror
    targets = ("/etc/probegate-x", "/src/probe.py", "/src/new.txt", "/opt/probegate/trial.json", "/usr/x")
    outside = {target: append(target) for target in targets}
    pathlib.Path("/work/new.txt").write_text("n")
    pathlib.Path("/work/data.txt").write_text("changed")
    os.remove("/work/gone.txt")
    os.mkdir("/work/sub")
    pathlib.Path("/tmp/t.txt").write_text("t")
    pathlib.Path("/dev/shm/s").write_bytes(b"s")
    print(json.dumps(outside))
"""


def test_writes_are_confined_and_reported(observe, make_trial):
    """Writes outside the work copy fail; writes in /work, /tmp and /dev/shm are reported exactly."""
    spec, inputs = make_trial(WRITES_PROBE, extra={"data.txt": "orig", "gone.txt": "bye"})
    obs = observe(spec, inputs)
    outside = stdout_json(obs)
    assert "written" not in outside.values() and outside["/etc/probegate-x"] == "Read-only file system", outside
    assert {(w.path, w.change) for w in obs.writes} == {
        ("/work/new.txt", Change.CREATED),
        ("/work/data.txt", Change.MODIFIED),
        ("/work/gone.txt", Change.DELETED),
        ("/work/sub", Change.CREATED),
        ("/tmp/t.txt", Change.CREATED),
        ("/dev/shm/s", Change.CREATED),
    }
    assert (inputs.tree_dir(spec.tree_digest) / "data.txt").read_text() == "orig"


FORGE_PROBE = """
    import json, sys
    def attempt(path, mode):
        try:
            return open(path, mode).close() or "opened"
        except OSError as exc:
            return exc.strerror
    attempts = {p: attempt(p, m) for p, m in (("/proc/1/fd/1", "wb"), ("/proc/1/mem", "rb"), ("/proc/1/environ", "rb"))}
    print('{"exit_code":0,"signal":null,"timed_out":false,"duration_s":0,"writes":[]}')
    print(json.dumps(attempts))
    sys.exit(7)
"""


def test_probe_cannot_reach_the_supervisor_or_forge_its_report(observe, make_trial):
    """The probe cannot open PID 1's fds or memory, and a fake report on its stdout is just output."""
    obs = observe(*make_trial(FORGE_PROBE))
    attempts = stdout_json(obs)
    assert all(result != "opened" for result in attempts.values()), attempts
    assert obs.exit_code == 7
    assert b'"exit_code":0' in obs.stdout.data


EXIT_PROBE = """
    import hashlib, sys
    print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())
    sys.stderr.write("boom\\n")
    sys.exit(3)
"""


def test_nonzero_exit_is_an_observation_not_a_fault(run_batch, make_trial):
    """A probe exiting 3 yields exit_code 3 with fault None, and it read the fixture on stdin."""
    fixture = b'{"user": "alice"}'
    spec, inputs = make_trial(EXIT_PROBE, fixture=fixture)
    [obs] = run_batch([spec], inputs)
    assert obs.fault is None and obs.exit_code == 3 and obs.signal is None and not obs.timed_out
    assert obs.stdout.data.decode().strip() == hashlib.sha256(fixture).hexdigest()
    assert obs.stderr.data == b"boom\n" and not obs.stderr.truncated
    assert obs.image_id.startswith("sha256:") and obs.worker_id == "pytest"


FLOOD_PROBE = """
    import sys
    chunk = bytes(range(256)) * 4096
    for _ in range(64):
        sys.stdout.buffer.write(chunk)
    sys.stderr.write("e" * 5000)
"""


def test_output_beyond_the_cap_is_truncated_with_full_length_and_digest(observe, make_trial):
    """64 MiB on stdout keeps the first 1024 bytes and records the full length and sha256."""
    obs = observe(*make_trial(FLOOD_PROBE, limits=Limits(output_cap_bytes=1024)))
    expected = bytes(range(256)) * 4096 * 64
    assert obs.exit_code == 0 and obs.stdout.truncated
    assert obs.stdout.data == expected[:1024] and obs.stdout.length == len(expected)
    assert obs.stdout.sha256 == hashlib.sha256(expected).hexdigest()
    assert obs.stderr.length == 5000 and obs.stderr.data == b"e" * 1024


def test_memory_hog_is_reported_oom_killed(observe, make_trial):
    """A probe that outgrows a 64 MiB limit is observed as oom_killed, not as a harness fault."""
    obs = observe(*make_trial("blocks = [b'\\x01' * (1 << 20) for _ in range(512)]\n", limits=Limits(memory_mb=64)))
    assert obs.oom_killed and obs.signal == 9 and obs.exit_code is None


def test_batch_runs_each_trial_in_order_in_a_fresh_container(run_batch, make_trial):
    """Three specs give three observations in order, each seeing its own trial index and a clean /tmp."""
    probe = """
        import os, pathlib
        print(os.environ["PROBEGATE_TRIAL_INDEX"], sorted(os.listdir("/tmp")))
        pathlib.Path("/tmp/mark").write_text("x")
    """
    first, inputs = make_trial(probe)
    specs = [first] + [make_trial(probe, trial_index=i, inputs=inputs)[0] for i in (1, 2)]
    started = time.monotonic()
    observations = run_batch(specs, inputs)
    assert (time.monotonic() - started) / len(specs) < 5.0
    assert [o.trial_index for o in observations] == [0, 1, 2]
    assert [o.stdout.data for o in observations] == [f"{i} []\n".encode() for i in range(3)]


def test_missing_image_or_tree_is_a_fault_observation(docker_client, run_batch, make_trial, tmp_path):
    """An absent image or tree yields a harness-fault observation, never an exception or a probe failure."""
    spec, inputs = make_trial("print('hi')\n")
    missing_image = DockerSandbox(client=docker_client, image="probegate/no-such-image:0")
    with pytest.raises(SandboxError, match="is missing"):
        missing_image.image_id()
    [obs] = missing_image.run_batch([spec], inputs)
    assert obs.fault is not None and "gate setup" in obs.fault and obs.exit_code is None
    inputs.trees[spec.tree_digest] = tmp_path / "no-such-tree"
    [obs] = run_batch([spec], inputs)
    assert obs.fault is not None and "could not start" in obs.fault and obs.exit_code is None


def test_interrupt_sweeps_the_runs_containers(run_batch, sandbox_image, docker_client, make_trial, run_id, leftovers):
    """A KeyboardInterrupt mid-batch removes every container this process made for the run before re-raising,
    and leaves the run's containers of another process alone (another worker process on this host serving
    the same run: its batches are its own to stop)."""
    mine = docker_client.containers.run(
        sandbox_image, ["sleep", "60"], detach=True, network_mode="none",
        labels={LABEL_RUN: run_id, LABEL_PID: str(os.getpid())},
    )  # fmt: skip
    theirs = docker_client.containers.create(
        sandbox_image, ["true"], network_mode="none", labels={LABEL_RUN: run_id, LABEL_PID: "1"}
    )
    spec, inputs = make_trial("print('hi')\n")

    def interrupt(digest: str) -> bytes:
        raise KeyboardInterrupt

    inputs.fixture_bytes = interrupt
    assert {c.id for c in leftovers()} == {mine.id, theirs.id}
    with pytest.raises(KeyboardInterrupt):
        run_batch([spec], inputs)
    assert [c.id for c in leftovers()] == [theirs.id]
    theirs.remove(force=True)


def test_sweep_removes_only_the_named_run(docker_client, sandbox_image, run_id, leftovers):
    """sweep(client, run_id) removes that run's containers and leaves another run's alone."""
    other = f"{run_id}-other"
    for rid in (run_id, other):
        docker_client.containers.create(sandbox_image, ["true"], network_mode="none", labels={LABEL_RUN: rid})
    assert sweep(docker_client, run_id) == 1
    assert leftovers() == []
    assert sweep(docker_client, other) == 1  # the other run's container was left alone


def test_clock_preflight_failure_makes_every_trial_of_the_batch_a_fault(run_batch, make_trial, monkeypatch):
    """When a child reads an instant other than the spec's, each trial of the batch is a harness fault naming why."""
    from gate.core.suite.trial import ClockSpec

    monkeypatch.setattr(ClockSpec, "faketimerc", lambda self: "2020-01-01 00:00:00")
    first, inputs = make_trial("print('never runs')\n")
    observed = run_batch([first, first.model_copy(update={"trial_index": 1})], inputs)
    assert all(o.fault is not None and "clock preflight" in o.fault for o in observed), observed
    assert all(o.exit_code is None for o in observed)


def test_a_spec_naming_an_image_this_engine_lacks_is_refused(run_batch, make_trial, sandbox_image):
    """A spec naming an image the engine lacks is a harness fault naming it, never run elsewhere; one present runs."""
    spec, inputs = make_trial("print('hi')\n")
    other = spec.model_copy(update={"image_id": "sha256:" + "0" * 64})
    same = spec.model_copy(update={"image_id": sandbox_image, "trial_index": 1})
    refused, ran = run_batch([other, same], inputs)
    assert refused.fault == f"image sha256:{'0' * 64} is not on this engine"
    assert refused.fault_origin == "harness" and refused.exit_code is None and refused.image_id == ""
    assert ran.fault is None and ran.stdout.data == b"hi\n" and ran.image_id == sandbox_image


def test_rusage_is_reported_per_trial(observe, make_trial):
    """User CPU time and max RSS come from wait4 on the probe: a busy, allocating probe shows both."""
    probe = "blob = b'x' * (40 << 20)\nn = 0\nfor i in range(3_000_000):\n    n += i\n"
    obs = observe(*make_trial(probe))
    assert obs.rusage_user_s > 0.05 and obs.rusage_sys_s >= 0 and obs.max_rss_kb > 40 * 1024


def test_file_size_and_open_file_limits_apply(observe, make_trial):
    """A file past file_size_mb fails with EFBIG and opening more than nofile descriptors fails with EMFILE."""
    probe = """
        import errno, json, os, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        try:
            with open("/work/big", "wb") as handle:
                handle.write(b"x" * (3 << 20))
            big = "written"
        except OSError as exc:
            big = errno.errorcode[exc.errno]
        fds = []
        try:
            while True:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as exc:
            print(json.dumps({"big": big, "fds": len(fds), "err": errno.errorcode[exc.errno]}))
    """
    obs = observe(*make_trial(probe, limits=Limits(file_size_mb=2, nofile=64)))
    result = stdout_json(obs)
    assert result["big"] == "EFBIG" and result["err"] == "EMFILE" and result["fds"] < 64
