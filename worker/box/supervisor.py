"""In-container supervisor: runs batches of probes, each fresh, and prints one JSON line per trial.

Standalone and stdlib-only: it is bind-mounted read-only into the sandbox image (Python 3.13) and
runs as PID 1 with `python3 -I -S /opt/probegate/supervisor.py /opt/probegate/in [idle_s [work_copy]]`
(work_copy: `overlay` or `copy`, see workdir.py). It serves one batch file at a time (`batch-0.json`,
`batch-1.json`, ... written by the host into the mounted input dir), reports each trial, then
`{"done": n}`, and waits for the next; it exits on a `stop` file or after idle_s without a batch, so
a warm container outlives no vanished host for long. Between trials it kills every other process
and resets the writable places (workdir.py), so no trial sees another's processes or writes. The
host reads the lines as they come and enforces deadlines itself too.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

if not __package__:
    # Run as a script with `python3 -I -S`: nothing of the image's environment or site reaches the
    # supervisor, and -I also leaves the script's folder off sys.path, so add our own read-only mount.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:  # inside the sandbox: siblings in the same read-only mount
    from fsdiff import snapshot
    from probeproc import Stream, drain, layout, oom_kills, open_oom_score, pump, spawn
    from steps import Steps
    from warmclient import Knobs, ParentLost, WarmParents
    from warmplan import Probe, pythonpath, shadowed
    from workdir import COPY, WorkDir
except ImportError:  # imported on the host as worker.box.supervisor
    from worker.box.fsdiff import snapshot
    from worker.box.probeproc import Stream, drain, layout, oom_kills, open_oom_score, pump, spawn
    from worker.box.steps import Steps
    from worker.box.warmclient import Knobs, ParentLost, WarmParents
    from worker.box.warmplan import Probe, pythonpath, shadowed
    from worker.box.workdir import COPY, WorkDir

PR_SET_DUMPABLE = 4
CANARY_DIR = "/tmp/.probegate"
CANARY_FILE = f"{CANARY_DIR}/credentials"
CANARY_ENV = "API_TOKEN"
CLOCK_SLACK_S = 5.0
IDLE_S = 60.0  # exit after this long without a batch (the host stops using a container well before)


def harden() -> None:
    """Make PID 1 undumpable so a same-uid probe cannot open /proc/1/fd/* or /proc/1/mem."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    # As PID 1, signals left at SIG_DFL are dropped when sent from inside the namespace, so the
    # probe cannot interrupt us; Python's own SIGINT handler would let it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)


def kill_others(spare: int) -> None:
    """SIGKILL and reap every process but ourselves and `spare` (the warm parent), which kill(-1)
    would take too: by /proc, round after round until none is left (a fork bomb forks meanwhile)."""
    for _ in range(1000):
        others = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in (1, os.getpid(), spare)]
        if not others:
            return
        for pid in others:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        while True:  # orphans are ours to reap; never block on the parent, which lives on
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def kill_everything() -> None:
    """SIGKILL and reap every process but ourselves; as PID 1 we are exempt from kill(-1)."""
    for _ in range(1000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        # kill(-1) also "succeeds" on zombies, so reap until no child is left before retrying.
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break


def check_clock(batch: dict) -> str | None:
    """Prove a child that clears LD_PRELOAD and FAKETIME* still reads the frozen instant; else say why.
    A ticking batch's child starts its clock at the instant when it first reads it, so the same slack holds."""
    expect = batch.get("frozen_epoch")
    if expect is None:
        return None
    env = {k: v for k, v in batch["trials"][0]["env"].items() if k != "LD_PRELOAD" and not k.startswith("FAKETIME")}
    argv = [sys.executable, "-S", "-c", "import time; print(time.time())"]
    child = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20)
    try:
        seen = float(child.stdout)
    except ValueError:
        return f"clock preflight child printed {child.stdout[:80]!r} (exit {child.returncode})"
    if abs(seen - float(expect)) > CLOCK_SLACK_S:
        return f"clock preflight: a child without LD_PRELOAD reads {seen:.0f}, not the frozen {float(expect):.0f}"
    return None


def plant_canary(canary: str) -> None:
    # Before the `before` snapshot, so the planted file is not the probe's write.
    os.mkdir(CANARY_DIR, 0o755)
    fd = os.open(CANARY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"[default]\napi_token = {canary}\n")


# What the container's first batch cost once (proving the clock, binding the work dir), timed when that
# batch asked for `timings`, and then in the reports of every batch that asks.
_once = Steps()


class PatchFault(Exception):
    """The patched tree or its probe made the trial unobservable: the tree did not fit the work dir,
    or the probe left files that cannot be read back. Reported as the patch's doing, never the harness's."""


def run_trial(batch: dict, trial: dict, workdir: WorkDir, steps: Steps) -> dict:
    """Give the trial a fresh work dir, run the probe once under its deadline, describe it; `steps` gets
    where its time went (its work dir, the probe, the write detection)."""
    work, roots = batch.get("work", "/work"), list(batch["writable_roots"])
    started = steps.start()
    try:
        work_before = workdir.lay_out(work)
    except OSError as exc:
        raise PatchFault(f"the patched tree could not be laid out in {work}: {type(exc).__name__}: {exc}") from exc
    steps.stop("layer", started)
    canary = trial.get("canary", "")
    env = dict(trial["env"])
    if canary:
        plant_canary(canary)
        env[CANARY_ENV] = canary
    # The work dir's state is known from laying it out; the rest (the canary) is small.
    others_before = snapshot([root for root in roots if root != work])
    cap = int(trial["output_cap_bytes"])
    out, err = Stream(cap, canary.encode()), Stream(cap, canary.encode())
    ooms = oom_kills()
    warm = batch.get("interpreter") == "warm"
    if warm:
        timed_out, code, usage, duration = run_warm(batch, trial, work, env, out, err, steps)
    else:
        _parents.stop()  # none in a fresh container; kill_everything() below would end it anyway
        with open(trial["stdin"], "rb") as stdin, layout(batch.get("aslr", True)):
            started = time.monotonic()
            proc = spawn(trial["argv"], stdin, work, env, batch["oom_fd"])
        timed_out, (_, status, rusage) = pump(proc, out, err, float(trial["deadline_s"]), started)
        duration = time.monotonic() - started
        usage = (rusage.ru_utime, rusage.ru_stime, rusage.ru_maxrss)
        code = proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never tries to reap it again
        # Orphans (other sessions included) could keep the pipes open or keep writing files.
        kill_everything()
        drain(proc.stdout.fileno(), out)
        drain(proc.stderr.fileno(), err)
        proc.stdout.close()
        proc.stderr.close()
    steps.put("probe", duration)
    if warm and _parents.fork_s is not None:
        steps.put("fork", _parents.fork_s)
    started = steps.start()
    try:
        writes = workdir.changes(work_before, others_before, roots)
    except OSError as exc:
        raise PatchFault(f"the probe's writes could not be read back: {type(exc).__name__}: {exc}") from exc
    steps.stop("detect", started)
    return {
        "exit_code": code if code >= 0 else None,
        "signal": -code if code < 0 else None,
        "timed_out": timed_out,
        "oom_killed": ooms >= 0 and oom_kills() > ooms,
        "duration_s": round(duration, 6),
        "rusage_user_s": round(usage[0], 6),
        "rusage_sys_s": round(usage[1], 6),
        "max_rss_kb": int(usage[2]),
        "canary_seen": out.canary_seen or err.canary_seen,
        "stdout": out.report(),
        "stderr": err.report(),
        "writes": writes,
        "work_copy": workdir.mode,
        "work_copy_note": workdir.note,
        "interpreter": "warm" if warm else "fresh",
        # The seed the probe's hashes ran with, wherever it is known: its warm parent's, or the batch's.
        "hash_seed": _parents.hash_seed if warm else batch.get("hash_seed"),
    }


_parents = WarmParents()


def run_warm(
    batch: dict, trial: dict, work: str, env: dict[str, str], out: Stream, err: Stream, steps: Steps
) -> tuple[bool, int, tuple[float, float, int], float]:
    """Run the trial's probe in a child of the warm parent: (timed out, exit code, usage, duration);
    `steps` gets what starting a parent cost ("parent", when one was started). The probe breaking its
    parent is a PatchFault."""
    probe = Probe(trial["argv"], work)
    # The names the tree shadows where this probe looks first; the parent must not have imported them.
    skip = shadowed([probe.first_path(), *pythonpath(env)])
    knobs = Knobs.of(batch)
    started = steps.start()
    if _parents.ready(trial["argv"][0], env, skip, knobs):
        steps.stop("parent", started)
    request = {"argv": trial["argv"], "env": env, "cwd": work}
    if knobs.ticking_from is not None:
        request["faketime"] = "@" + knobs.ticking_from  # the child's own clock starts at the instant
    try:
        with open(trial["stdin"], "rb") as stdin:
            deadline_s = float(trial["deadline_s"])
            timed_out, status, usage, pipes, duration = _parents.run(request, stdin, out, err, deadline_s)
    except ParentLost as exc:
        _parents.stop()
        kill_everything()
        raise PatchFault(f"the probe broke its warm parent: {exc}") from None
    kill_others(_parents.pid or -1)
    for fd, stream in zip(pipes, (out, err), strict=True):
        drain(fd, stream)
        os.close(fd)
    return timed_out, os.waitstatus_to_exitcode(status), usage, duration


def emit(report: dict) -> None:
    """Write one report line to our own stdout, which only the host reads."""
    line = (json.dumps(report, separators=(",", ":")) + "\n").encode("ascii")
    view = memoryview(line)
    while view:
        view = view[os.write(1, view) :]


def wait_batch(in_dir: str, seq: int, idle_s: float) -> str | None:
    """The path of batch `seq` once the host has written it; None on a stop file or when idle too long.

    Polled (stdlib only, no inotify): every millisecond at first, since the next batch usually
    follows at once, then more slowly so an idle container costs next to nothing."""
    path, stop = f"{in_dir}/batch-{seq}.json", f"{in_dir}/stop"
    since = time.monotonic()
    while True:
        if os.path.exists(path):
            return path
        idle = time.monotonic() - since
        if idle >= idle_s or os.path.exists(stop):
            return None
        time.sleep(0.001 if idle < 1.0 else 0.02)


def run_batch(batch: dict, workdir: WorkDir) -> int | None:
    """Run and report every trial of one batch; an exit code when the container must not go on. A batch
    that asks for `timings` gets where each trial's time went in its report (`steps_s`, for the benchmarks)."""
    try:
        # Once per container, before its first trial: the mode every trial of it then runs in. An
        # unreadable tree is no error here: the first trial reports it, as the patch's doing.
        workdir.bind(batch.get("src", "/src"), batch)
    except Exception as exc:
        emit({"batch_error": f"choosing the work copy: {type(exc).__name__}: {exc}"})
        return 2
    for trial in batch["trials"]:
        steps = Steps(on=bool(batch.get("timings")))
        try:
            report = run_trial(batch, trial, workdir, steps)
        except Exception as exc:
            # The sandbox may be in an unknown state: stop, and let the host start a fresh container.
            origin = "patch" if isinstance(exc, PatchFault) else "unknown"
            emit({"id": trial["id"], "error": f"{type(exc).__name__}: {exc}", "origin": origin})
            return 2
        # Reset before the report goes out, so it can say what the reset cost; a failure here is still
        # this trial's doing, and its report goes out first.
        started = steps.start()
        try:
            workdir.reset(batch["writable_roots"])
            failed = None
        except OSError as exc:
            failed = f"{type(exc).__name__}: {exc}"
        steps.stop("reset", started)
        if steps.on:
            report["steps_s"] = {**_once.seconds, **steps.seconds}
        emit({"id": trial["id"], **report})
        if failed is not None:
            emit({"reset_error": failed})
            return 2
    return None


def main(argv: list[str]) -> int:
    try:
        oom_fd = open_oom_score()
        in_dir = argv[1]
        idle_s = float(argv[2]) if len(argv) > 2 else IDLE_S
        workdir = WorkDir(argv[3] if len(argv) > 3 else COPY, _once)
        workdir.enter()  # before harden(): an undumpable process can no longer write its uid_map
        harden()
    except Exception as exc:
        emit({"batch_error": f"{type(exc).__name__}: {exc}"})
        return 2
    seq = 0
    while (path := wait_batch(in_dir, seq, idle_s)) is not None:
        try:
            with open(path, "rb") as handle:
                batch = json.load(handle)
            batch["oom_fd"] = oom_fd
            reason = None
            if seq == 0:
                # The clock is the container's (the host keys warm containers by it): prove it once.
                _once.on = bool(batch.get("timings"))
                started = _once.start()
                reason = check_clock(batch)
                _once.stop("clock", started)
        except Exception as exc:
            emit({"batch_error": f"{type(exc).__name__}: {exc}"})
            return 2
        if reason is not None:
            emit({"batch_error": reason})
            return 2
        code = run_batch(batch, workdir)
        if code is not None:
            return code
        emit({"done": seq})
        seq += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
