"""A slow server in a fleet of two: wall time with one worker's probes at a quarter of a CPU against two fast ones.

Servers simulated on one machine, as `benchmarks/fleet.py` does (a private redis-server, enrolled `gate-worker
serve` processes w1 and w2 on real Docker, each under its own broker user, concurrency 1, a coordinator reading
the registry). w2 is made slow the way a weak server is: a watcher gives each of its probe containers a CPU quota
of `--cpus` (a quarter of a CPU by default) the moment it appears (`docker update`; each container carries the
pid of the worker process that started it), so everything inside them, the sandbox's supervisor and the probe,
runs on that share; the work outside them (the worker process, `docker exec`) is not slowed, as it would be on
a weak server.

The suite: `--trials` trials (400) over `--properties` properties, a probe that burns `--burn-ms` of CPU and prints
a line. Each round times, after a warm-up run of each:

- fast: w1 and w2 unlimited (the baseline);
- slowed: w2 limited, the coordinator dealing by room (batches sent as each worker has room, the one behind
  giving up its last turns, stragglers copied);
- slowed, at once: the same with `room_per_process=0` (`gate run --room 0`): every batch of a wave sent at once
  round the workers and no straggler copied, as before dealing by room.

Reported: seconds and trials/s per run, the trials each worker answered, and slowed/fast (the issue's target: at
most 1.3; 1.93 before dealing by room).

    .venv/bin/python -m benchmarks.straggler [--trials 400] [--cpus 0.25] [--burn-ms 20] [--repeat 2]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator

import docker

from benchmarks.common import bench_fleet, start_fleet, timed_run
from gate.io.snapshot import LocalInputs
from worker.host.engine import docker_client
from worker.host.sweep import LABEL_PID


def probe(burn_ms: float) -> str:
    """A probe that burns `burn_ms` of CPU in its container, then prints a line."""
    loop = f"while time.process_time() - t < {burn_ms / 1000!r}:\n    pass\n"
    return f"import time\nt = time.process_time()\n{loop}print('ok')\n"


def limit(client: docker.DockerClient, container_id: str, cpus: float) -> None:
    """Set a running container's CPU limit (`docker update --cpus`: NanoCpus, the field the sandbox sets, which
    docker-py's `update` does not offer)."""
    api = client.api
    response = api._post_json(api._url("/containers/{0}/update", container_id), data={"NanoCpus": int(cpus * 1e9)})
    api._raise_for_status(response)


def group_pids(pgid: int) -> set[str]:
    """The pids of process group `pgid` (a worker and its pool processes), as container labels carry them."""
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False)
    return set(found.stdout.split())


@contextlib.contextmanager
def slowed(client: docker.DockerClient, pgid: int, cpus: float) -> Iterator[list[str]]:
    """While open, every probe container a process of group `pgid` (one worker) starts gets a CPU quota of `cpus`
    (matched by the owning process's pid label: a pool process may name itself otherwise than its worker)."""
    done: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            # Anything a racing container does (removed between list and update) is left for the next look.
            with contextlib.suppress(Exception):
                pids = group_pids(pgid)
                for container in client.containers.list(filters={"label": LABEL_PID}):
                    if container.labels.get(LABEL_PID) in pids and container.id not in done:
                        limit(client, container.id, cpus)
                        done.append(container.id)

    thread = threading.Thread(target=watch, name="slow-containers", daemon=True)
    thread.start()
    try:
        yield done
    finally:
        stop.set()
        thread.join(5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--properties", type=int, default=20)
    parser.add_argument("--cpus", type=float, default=0.25, help="the slow worker's containers' CPU share")
    parser.add_argument("--burn-ms", type=float, default=20.0, help="CPU each trial's probe burns")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    names = ["w1", "w2"]
    rows: list[dict[str, dict]] = []
    with bench_fleet("straggler", probe(args.burn_ms), names) as fleet:
        start_fleet(fleet.workers, names, {n: fleet.workers.urls[n] for n in names}, 1)
        with LocalInputs(fleet.tree, {fleet.digest: fleet.fixture}) as inputs:

            def timed(label: str, round_: int, **options: int) -> dict:
                ctx = (fleet.redis.url, fleet.registry)
                timed_run(*ctx, f"warm-{label}-{round_}", 8, 2, inputs, fleet.digest, **options)
                run = (f"{label}-{round_}", args.trials, args.properties, inputs, fleet.digest)
                row = timed_run(*ctx, *run, **options)
                print(f"  round {round_ + 1} {label}: {row['elapsed']:.1f} s, split {row['split']}, "
                      f"events {dict(row['events']) or '-'}", file=sys.stderr)  # fmt: skip
                return row

            for round_ in range(args.repeat):
                row = {"fast": timed("fast", round_)}
                with slowed(docker_client(), fleet.workers.procs["w2"].pid, args.cpus) as limited:
                    row["slowed"] = timed("slowed", round_)
                    row["at once"] = timed("at-once", round_, room_per_process=0)
                    if not limited:
                        raise RuntimeError("no container of w2 was slowed")
                rows.append(row)
        fleet.workers.stop_all()

    print(
        f"(c) {args.trials} trials a run over {args.properties} properties, each probe burning {args.burn_ms:.0f} ms "
        f"of CPU; 2 enrolled workers of concurrency 1 on Docker; slowed: w2's containers at {args.cpus} CPU"
    )
    print(
        f"{'round':>5}{'fast s':>8}{'slowed s':>10}{'split':>10}{'ratio':>7}{'at once s':>11}{'split':>10}{'ratio':>7}"
    )
    for k, row in enumerate(rows, 1):
        fast, slow, once = row["fast"], row["slowed"], row["at once"]
        print(
            f"{k:>5}{fast['elapsed']:>8.1f}{slow['elapsed']:>10.1f}{slow['split']:>10}"
            f"{slow['elapsed'] / fast['elapsed']:>7.2f}{once['elapsed']:>11.1f}{once['split']:>10}"
            f"{once['elapsed'] / fast['elapsed']:>7.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
