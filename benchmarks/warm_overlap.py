"""Would starting the next warm parent ahead of its turn take its start off the trials' path? (issue 27)

    .venv/bin/python -m benchmarks.warm_overlap [--rounds 4] [--cpus 1 2]

In the heavy probe's project image (benchmarks/heavy/, numpy), in a container locked down as the
warm-interpreter benchmark's bare loop, with worker/box mounted read-only: one warm parent
(worker/box/warmclient.py) serves the heavy probe, and per round PARENT_TRIALS trials run alone,
after a second parent's start (one after the other, as today), and while a second parent starts
beside them (what starting it ahead would do). Best and median per way, at each CPU limit.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from pathlib import Path

from docker.types import Mount

from benchmarks.common import CLOCK, HEAVY, bare_container, copy_tree, project_image
from worker.host.batchfile import supervisor_env
from worker.host.engine import docker_client
from worker.host.sweep import sweep

BOX = Path(__file__).resolve().parents[1] / "worker" / "box"
HARNESS = """
import json, os, statistics, sys, threading, time
from probeproc import Stream
from warmclient import PARENT_TRIALS, WarmParents

env, rounds = json.loads(sys.argv[1]), int(sys.argv[2])
serving = WarmParents(trials_per_parent=10**9)
serving.ready("python3", env, set())

def trials(n):
    for _ in range(n):
        out, err = Stream(1 << 20, b""), Stream(1 << 20, b"")
        with open("/opt/bench/stdin", "rb") as stdin:
            request = {"argv": ["python3", "probe.py"], "env": env, "cwd": "/src"}
            _, status, _, pipes, _ = serving.run(request, stdin, out, err, 30.0)
        for fd in pipes:
            os.close(fd)
        assert status == 0, bytes(err.head)

def timed(way):
    other = WarmParents()
    started = time.monotonic()
    if way == "serial":
        other.ready("python3", env, set())
        trials(PARENT_TRIALS)
    elif way == "overlap":
        beside = threading.Thread(target=other.ready, args=("python3", env, set()))
        beside.start()
        trials(PARENT_TRIALS)
        beside.join()
    else:
        trials(PARENT_TRIALS)
    took = time.monotonic() - started
    other.stop()
    return took

trials(4)  # untimed: the first children touch what later ones find in memory
got = {"alone": [], "serial": [], "overlap": []}
for _ in range(rounds):
    for way in got:
        got[way].append(timed(way))
print(json.dumps({way: [min(t), statistics.median(t)] for way, t in got.items()}))
"""


def measure(client, image: str, tree: Path, bench: Path, cpus: float, rounds: int, run_id: str) -> dict:
    """Seconds per PARENT_TRIALS trials, [best, median] for each way, in one container of `cpus` CPUs."""
    mounts = [
        Mount("/src", str(tree), type="bind", read_only=True),
        Mount("/opt/bench", str(bench), type="bind", read_only=True),
        Mount("/opt/box", str(BOX), type="bind", read_only=True),
        Mount("/etc/faketimerc", str(bench / "faketimerc"), type="bind", read_only=True),
    ]
    container = bare_container(
        client,
        image,
        mounts,
        run_id,
        cpus=cpus,
        environment=supervisor_env(),
        tmpfs={"/tmp": "size=64m,mode=1777"},
    )
    try:
        env = {**supervisor_env(), "TZ": "UTC"}
        argv = ["python3", "/opt/bench/overlap.py", json.dumps(env), str(rounds)]
        # The box's modules by their bare names, as the supervisor imports them beside it.
        code, output = container.exec_run(argv, environment={"PYTHONPATH": "/opt/box"})
        if code != 0:
            raise SystemExit(f"overlap harness failed: {output.decode(errors='replace')[-500:]}")
        return json.loads(output.decode().strip().splitlines()[-1])
    finally:
        container.remove(force=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--cpus", type=float, nargs="+", default=[1.0, 2.0])
    args = parser.parse_args(argv)
    image = project_image(HEAVY / "gate.toml")
    if image is None:
        return 0
    client = docker_client()
    run_id = f"bench-{uuid.uuid4().hex[:12]}"
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="probegate-overlap-") as tmp_name:
            tmp = Path(tmp_name)
            tree = copy_tree(HEAVY, tmp / "heavy")
            bench = tmp / "bench"
            bench.mkdir()
            (bench / "stdin").write_bytes(b'{"n": 100000}')
            (bench / "faketimerc").write_text(CLOCK.faketimerc() + "\n")
            (bench / "overlap.py").write_text(HARNESS)
            for path in (bench, *bench.iterdir()):
                path.chmod(0o755 if path.is_dir() else 0o444)
            for cpus in args.cpus:
                row = measure(client, image, tree, bench, cpus, args.rounds, run_id)
                results[str(cpus)] = row
                ways = "  ".join(f"{way} {1000 * low:.0f} / {1000 * mid:.0f}" for way, (low, mid) in row.items())
                print(f"{cpus:g} CPU: ms per 16 trials, best / median of {args.rounds}: {ways}", flush=True)
    finally:
        sweep(client, run_id)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
