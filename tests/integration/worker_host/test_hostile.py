"""Hostile probes against the real engine: each is contained, gets the right outcome (never a pass
of a safety check, never a hang), and leaves no container of its run behind."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from gate.core.checks import BUILTINS, Trial, judge
from gate.core.suite.trial import Limits, Observation, TrialSpec
from gate.core.verdicts.verdict import Band, OutcomeKind
from worker.host.sandboxes.docker import SUPERVISOR, DockerSandbox

pytestmark = pytest.mark.integration

FROZEN_EPOCH = 1772323200.0  # 2026-03-01T00:00:00Z
CANARY = "c0ffee" + "5ec7e7" * 4 + "f00d"


def last_json(obs: Observation) -> dict:
    return json.loads(obs.stdout.data.decode().strip().splitlines()[-1])


def safety(check: str, obs: Observation, **params: object) -> OutcomeKind:
    return judge(BUILTINS[check], Trial(observation=obs, fixture=b"{}", params=params), Band.SAFETY).kind


def batch(make_trial, probe: str, n: int, **kw) -> tuple[list[TrialSpec], object]:
    first, inputs = make_trial(probe, **kw)
    rest = [first.model_copy(update={"trial_index": i}) for i in range(1, n)]
    return [first, *rest], inputs


@pytest.fixture(params=["overlay", "copy", "overlay+warm"])
def mode(request) -> str:
    """Every hostile probe runs in both work copy modes (copy-on-write overlays and the forced fallback)
    with a fresh interpreter, and with overlays in a warm interpreter's child (docs/reference/sandbox.md)."""
    return request.param


@pytest.fixture
def work_copy(mode: str) -> str:
    return mode.partition("+")[0]


@pytest.fixture
def interpreter(mode: str) -> str:
    return "warm" if mode.endswith("+warm") else "fresh"


@pytest.fixture(autouse=True)
def _no_leftovers(leftovers):
    yield
    assert leftovers() == [], "a container of this test's run remains"


NETWORK = """
    import json, socket
    def attempt(action):
        try:
            action()
            return "connected"
        except OSError as exc:
            return f"refused: {exc}"
    print(json.dumps({
        "outside": attempt(lambda: socket.create_connection(("1.1.1.1", 443), timeout=2)),
        "redis": attempt(lambda: socket.create_connection(("127.0.0.1", 6379), timeout=2)),
        "dns": attempt(lambda: socket.getaddrinfo("pypi.org", 443)),
    }))
"""


def test_tcp_outside_loopback_redis_and_dns_are_all_refused(observe, make_trial):
    """TCP to a public address, to 127.0.0.1:6379 and a DNS lookup all fail inside the sandbox."""
    result = last_json(observe(*make_trial(NETWORK, deadline_s=3)))
    assert all(v.startswith("refused") for v in result.values()), result


OUTSIDE = """
    import json
    def append(target):
        try:
            with open(target, "a") as handle:
                handle.write("x")
            return "written"
        except OSError as exc:
            return exc.strerror
    targets = ("/etc/passwd", "/src/probe.py", "/opt/probegate/supervisor.py", "/usr/x", "/tmp/stash")
    print(json.dumps({t: append(t) for t in targets}))
"""


def test_writes_outside_the_work_copy_fail_or_fail_the_safety_check(observe, make_trial):
    """Read-only places refuse the write; the one writable place outside the write map fails no_unmapped_write."""
    obs = observe(*make_trial(OUTSIDE, deadline_s=3))
    result = last_json(obs)
    assert [t for t, r in result.items() if r == "written"] == ["/tmp/stash"], result
    assert safety("no_unmapped_write", obs, write_map=["out/*"]) is OutcomeKind.MISS


MUTATE = """
    import json, os, pathlib
    if os.environ["PROBEGATE_TRIAL_INDEX"] == "0":
        pathlib.Path("probe.py").write_text("print('MUTATED')\\n")
        pathlib.Path("data.txt").write_text("changed")
        pathlib.Path("/tmp/left").write_text("x")
        pathlib.Path("/dev/shm/left").write_text("x")
        os.chmod(".", 0o500)  # and try to make the work copy hard to reset
    print(json.dumps({"data": pathlib.Path("data.txt").read_text(), "tmp": sorted(os.listdir("/tmp")),
                      "shm": sorted(os.listdir("/dev/shm"))}))
"""


def test_a_mutated_work_tree_is_not_seen_by_the_next_trial_in_the_batch(run_batch, make_trial):
    """Trial 0 rewrites probe.py and data and leaves scratch files; trial 1 of the same batch sees the originals."""
    specs, inputs = batch(make_trial, MUTATE, 2, extra={"data.txt": "orig"}, deadline_s=3)
    first, second = run_batch(specs, inputs)
    assert first.fault is None and second.fault is None, (first.fault, second.fault)
    assert safety("no_unmapped_write", first, write_map=["out/*"]) is OutcomeKind.MISS
    assert last_json(second) == {"data": "orig", "tmp": [], "shm": []}
    assert second.writes == ()


HOST_FILES = """
    import json, os
    def read(path):
        try:
            with open(path, "rb") as handle:
                handle.read(1)
            return "read"
        except OSError as exc:
            return type(exc).__name__
    paths = ("/var/run/docker.sock", "/run/docker.sock", "/etc/shadow", "/proc/1/root/etc/hostname",
             "/proc/1/environ", "/root/.bashrc", "/home")
    print(json.dumps({"reads": {p: read(p) for p in paths}, "src": sorted(os.listdir("/src"))}))
"""


def test_docker_socket_and_host_files_are_absent_or_denied(observe, make_trial):
    """The Docker socket does not exist inside; root-only and supervisor files are denied; /src holds only the tree."""
    result = last_json(observe(*make_trial(HOST_FILES, deadline_s=3)))
    reads = result["reads"]
    assert reads["/var/run/docker.sock"] == reads["/run/docker.sock"] == "FileNotFoundError", reads
    assert all(outcome != "read" for outcome in reads.values()), reads
    assert result["src"] == ["probe.py"]


FORK_BOMB = """
    import os, time
    children = 0
    try:
        while True:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            children += 1
    except OSError:
        print(children, flush=True)
"""


def test_fork_bomb_is_bounded_and_the_next_trial_still_runs(run_batch, make_trial):
    """A fork bomb stops at the pids limit, ends at its deadline, and the next trial in the batch runs clean."""
    bomb, inputs = make_trial(FORK_BOMB, deadline_s=2, limits=Limits(pids=32))
    after, _ = make_trial("print('fine')\n", deadline_s=2, limits=Limits(pids=32), inputs=inputs, trial_index=1)
    after = after.model_copy(update={"tree_digest": bomb.tree_digest})
    started = time.monotonic()
    first, second = run_batch([bomb, after], inputs)
    assert time.monotonic() - started < 15
    assert first.fault is None and int(first.stdout.data) < 32
    assert second.fault is None and second.exit_code == 0


def test_memory_bomb_is_oom_killed_and_the_batch_goes_on(run_batch, make_trial):
    """A probe outgrowing 64 MiB is observed oom_killed (not a fault) and the next trial still runs."""
    bomb = """
        import os
        if os.environ["PROBEGATE_TRIAL_INDEX"] == "0":
            blocks = [b"\\x01" * (1 << 20) for _ in range(512)]
        print("ok")
    """
    specs, inputs = batch(make_trial, bomb, 2, deadline_s=3, limits=Limits(memory_mb=64))
    first, second = run_batch(specs, inputs)
    assert first.fault is None and first.oom_killed and first.signal == 9
    assert second.fault is None and not second.oom_killed and second.stdout.data == b"ok\n"


FLOOD = """
    import sys
    chunk = bytes(range(256)) * 4096
    for _ in range(1100):
        sys.stdout.buffer.write(chunk)
"""


# Serial, and a deadline far above the 1-2 s the flood takes on a quiet machine: it timed out at 3 s under
# -n 4 and, in the serial phase, at load 15; what is asserted is the cap, the length and the digest.
@pytest.mark.serial
def test_a_gibibyte_of_stdout_is_capped_with_full_length_and_digest(observe, make_trial):
    """1.07 GiB on stdout finishes inside its deadline, keeps 1 KiB, and records the full length and sha256."""
    obs = observe(*make_trial(FLOOD, deadline_s=30, limits=Limits(output_cap_bytes=1024)))
    chunk = bytes(range(256)) * 4096
    digest = hashlib.sha256()
    for _ in range(1100):
        digest.update(chunk)
    assert not obs.timed_out and obs.exit_code == 0
    assert obs.stdout.length == 1100 * len(chunk) > 1 << 30 and obs.stdout.data == chunk[:1024]
    assert obs.stdout.sha256 == digest.hexdigest()


# Serial: the kill must land within a second of the deadline, which a machine busy with parallel tests stretches.
@pytest.mark.serial
def test_a_loop_ignoring_sigterm_times_out_at_its_deadline(observe, make_trial):
    """A SIGTERM-ignoring busy loop is killed at 1 s and judged a timeout, not a pass."""
    probe = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass\n"
    obs = observe(*make_trial(probe, deadline_s=1.0))
    assert obs.timed_out and obs.signal == 9 and 1.0 <= obs.duration_s < 2.0
    verdict = judge(BUILTINS["exits_zero"], Trial(observation=obs, fixture=b"{}"), Band.CONTRACT)
    assert verdict.kind is OutcomeKind.TIMEOUT


ORPHAN = """
    import os, subprocess, sys, time
    if os.environ["PROBEGATE_TRIAL_INDEX"] == "0":
        late = ("import time, pathlib\\ntime.sleep(0.5)\\n"
                "pathlib.Path('/tmp/late').write_text('x')\\npathlib.Path('/work/late').write_text('x')")
        subprocess.Popen([sys.executable, "-c", late], start_new_session=True)
        print("left a child")
    else:
        time.sleep(1.0)
        print(sorted(os.listdir("/tmp")), os.path.exists("/work/late"))
"""


# Serial: trial 0 must end within the orphan's 0.5 s, or the orphan writes before the kill (seen 0.87 s under -n 4).
@pytest.mark.serial
def test_an_orphan_is_killed_before_the_next_trial_and_its_writes_never_appear(run_batch, make_trial):
    """A detached child meant to write 0.5 s later is killed with its probe; trial 1 never sees its files."""
    specs, inputs = batch(make_trial, ORPHAN, 2, deadline_s=3)
    first, second = run_batch(specs, inputs)
    assert first.fault is None and first.duration_s < 0.5 and first.writes == ()
    assert second.fault is None and second.stdout.data == b"[] False\n" and second.writes == ()


SCRUB = """
    import json, os, subprocess, sys, time
    child = subprocess.run(["/usr/bin/env", "-i", sys.executable, "-c", "import time; print(time.time())"],
                           capture_output=True, text=True, check=True)
    print(json.dumps({"env": sorted(os.environ), "child": float(child.stdout)}))
"""


def test_a_child_with_an_empty_environment_still_sees_the_frozen_clock(observe, make_trial):
    """A grandchild started through `env -i` (no LD_PRELOAD, no FAKETIME*, no TZ) still reads the frozen instant."""
    result = last_json(observe(*make_trial(SCRUB, deadline_s=3)))
    assert abs(result["child"] - FROZEN_EPOCH) < 5


LEAK = """
    import os, sys
    if os.environ["PROBEGATE_TRIAL_INDEX"] == "0":
        print(os.environ["API_TOKEN"])
    elif os.environ["PROBEGATE_TRIAL_INDEX"] == "1":
        sys.stdout.write("x" * 200_000)  # past the 64 KiB cap
        sys.stderr.write(open("/tmp/.probegate/credentials").read())
    else:
        print("nothing to see")
"""


def test_a_probe_printing_the_canary_fails_no_secret_in_output(run_batch, make_trial):
    """The canary echoed from the environment, or from the credentials file past the cap, fails the check."""
    specs, inputs = batch(make_trial, LEAK, 3, deadline_s=3)
    specs = [s.model_copy(update={"canary": f"{CANARY}{s.trial_index}"}) for s in specs]
    env_leak, file_leak, clean = run_batch(specs, inputs)
    assert env_leak.canary_seen and file_leak.canary_seen and not clean.canary_seen
    assert safety("no_secret_in_output", env_leak) is OutcomeKind.MISS
    assert safety("no_secret_in_output", file_leak) is OutcomeKind.MISS
    assert safety("no_secret_in_output", clean) is OutcomeKind.HIT
    assert clean.writes == ()  # the planted file is not the probe's write


def wrapped_supervisor(tmp_path: Path, action: str) -> Path:
    """The real supervisor, except that the second trial of a 4-trial container does `action`."""
    patch = f"""
_real_run_trial = run_trial


def run_trial(batch, trial, *rest):
    if len(batch["trials"]) == 4 and trial["id"] == "1":
        {action}
    return _real_run_trial(batch, trial, *rest)


"""
    source = SUPERVISOR.read_text().replace('if __name__ == "__main__":', patch + 'if __name__ == "__main__":')
    path = tmp_path / "supervisor.py"
    path.write_text(source)
    path.chmod(0o444)
    return path


@pytest.mark.parametrize(
    ("action", "expect"),
    [("import time; time.sleep(60)", "timed_out"), ("os._exit(3)", "fault")],
)
def test_a_wedged_or_dead_supervisor_costs_one_trial_and_the_batch_goes_on(
    docker_client, sandbox_image, make_trial, tmp_path, action, expect, work_copy
):
    """A supervisor that hangs or dies on trial 1 loses only that trial; trials 2 and 3 run in a new container."""
    supervisor = wrapped_supervisor(tmp_path, action)
    sandbox = DockerSandbox(client=docker_client, grace_s=1.0, supervisor=supervisor, work_copy=work_copy)
    # A deadline a loaded machine still meets for a print (1 s was missed at load 15); the batch must end
    # long before the wedged supervisor's 60 s, not within a tight time.
    specs, inputs = batch(make_trial, "import os\nprint(os.environ['PROBEGATE_TRIAL_INDEX'])\n", 4, deadline_s=5)
    started = time.monotonic()
    observed = sandbox.run_batch(specs, inputs)
    assert time.monotonic() - started < 40
    assert [o.stdout.data for i, o in enumerate(observed) if i != 1] == [b"0\n", b"2\n", b"3\n"]
    lost = observed[1]
    if expect == "timed_out":
        assert lost.timed_out and lost.fault is None
    else:
        assert lost.fault is not None and "container exit 3" in lost.fault
