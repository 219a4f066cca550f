"""Ten servers joining with one 10-use token, simulated on one machine as worker processes: all serving within 60 s.

A private redis-server, a worker registry in a temporary folder and `gate workers admit` running as the
coordinator's admission process (PROBEGATE_REDIS_ADMIN and PROBEGATE_WORKERS set, as on a coordinator). First
the baseline: one server joins alone with a one-use token of its own (`--prefix solo`), is timed to serving, then
stopped and revoked. Then `gate workers invite --uses 10 --prefix bench`, and at t0 ten `gate-worker join TOKEN`
processes start at once, each with its own key, broker file and blob cache, concurrency 1, the real Docker sandbox
(each checks the sandbox image and runs its preflight container before it serves: part of the honest cost of a
server joining), in its own session. Per server, from t0:

- admitted: its broker file written (the file's mtime), i.e. the admission enrolled it and it opened the grant;
- serving: it answers a Celery ping by its enrolled name (`bench-<key id>@<host>`), asked in 0.25 s rounds (on
  a busy machine a worker answered up to a second after its log said "ready.").

Printed: min/median/max of both over the ten, the time until all ten serve and whether that is within `--within`
(60 s), the same two times for the server alone and the ratio; the median of each step read off the servers'
logs (start to join request sent, to admitted, to the sandbox image checked, to the preflight container's
result and the sweep of stale containers, to serving); `gate workers list` (10 enrolled bench-… workers) and
`gate workers invites` (the invite used 10/10); an eleventh `gate-worker join` with the same token, which must be
refused with exit 65. With `--run`, a batch of trivial trials goes through a `CeleryExecutor` reading the
registry, and the distinct workers that answered are counted. Exit 1 when a server did not serve within `--cap`
or the eleventh join was not refused.

    .venv/bin/python -m benchmarks.join_fleet [--servers 10] [--within 60] [--cap 180] [--run] [--trials 40] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from gate.core.suite.trial import Limits
from gate.core.testing import make_specs
from gate.io.snapshot import LocalInputs
from gate.io.workers import load_roster
from tests.support.servers import GATE, RedisServer
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.app import make_app
from worker.host.engine import docker_client
from worker.host.sweep import sweep_dead_workers

GATE_WORKER = str(Path(sys.executable).with_name("gate-worker"))
PREFIX, SOLO_PREFIX = "bench", "solo"
REFUSED = 65  # what a refused join exits with (gate.core.errors.TokenError)
PING_S = 0.25  # the reply window of each ping round: the resolution of "serving"
# Lines in a server's log: its join request sent; the sandbox image checked; the preflight container run.
MARKS = {
    "sent": "gate-worker: join request ",
    "image": "gate-worker: sandbox image ",
    "preflight": "gate-worker: preflight ok",
}


@dataclass
class Server:
    """One `gate-worker join` process: its files under `tmp`, and when (seconds after t0) it reached each step."""

    label: str
    tmp: Path
    proc: subprocess.Popen[bytes] | None = None
    t0: float = 0.0  # monotonic
    t0_wall: float = 0.0
    name: str | None = None  # the enrolled name, from its broker file
    sent_s: float | None = None
    admitted_s: float | None = None
    image_s: float | None = None
    preflight_s: float | None = None
    serving_s: float | None = None
    exit_code: int | None = None  # set when it exited before serving

    @property
    def key(self) -> Path:
        return self.tmp / f"{self.label}.key"

    @property
    def broker_file(self) -> Path:
        return self.tmp / f"{self.label}.broker.json"

    @property
    def log(self) -> Path:
        return self.tmp / f"{self.label}.log"

    def start(self, token: str, t0: float, t0_wall: float) -> None:
        self.t0, self.t0_wall = t0, t0_wall
        argv = [
            *(GATE_WORKER, "join", token, "--key", str(self.key), "--broker-file", str(self.broker_file)),
            *("--concurrency", "1", "--cache", str(self.tmp / f"cache-{self.label}")),
            *("--pool", "off"),  # never a `gate pool serve` another user may run on this machine
        ]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def look(self) -> None:
        """Note the steps reached since the last look: the broker file (by its mtime), the log's marks."""
        now = time.monotonic() - self.t0
        if self.admitted_s is None and self.broker_file.exists():
            with contextlib.suppress(OSError, ValueError, KeyError):
                self.name = json.loads(self.broker_file.read_text())["name"]
                self.admitted_s = self.broker_file.stat().st_mtime - self.t0_wall
        if self.preflight_s is None:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            if self.sent_s is None and MARKS["sent"] in text:
                self.sent_s = now
            if self.image_s is None and MARKS["image"] in text:
                self.image_s = now
            if MARKS["preflight"] in text:
                self.preflight_s = now
        if self.proc is not None and self.serving_s is None and (code := self.proc.poll()) is not None:
            self.exit_code = code

    @property
    def pending(self) -> bool:
        return self.serving_s is None and self.exit_code is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)

    def wait_stopped(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


class Coordinator:
    """`gate workers …` with the admin broker URL and the registry in the environment; `admit` runs alongside."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.registry = tmp / "coordinator" / "workers.json"
        self.env = {**os.environ, "PROBEGATE_REDIS_ADMIN": url, "PROBEGATE_WORKERS": str(self.registry)}
        self.log = tmp / "admission.log"
        self.admission: subprocess.Popen[bytes] | None = None

    def gate(self, *argv: str) -> list[dict]:
        done = subprocess.run([GATE, "workers", *argv], capture_output=True, text=True, env=self.env, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"gate workers {argv[0]} exited {done.returncode}: {done.stderr}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def admit(self) -> None:
        with self.log.open("wb") as log:
            self.admission = subprocess.Popen(
                [GATE, "workers", "admit"], stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        give_up = time.monotonic() + 30
        while "admitting join requests" not in self.log.read_text(errors="replace"):
            if self.admission.poll() is not None or time.monotonic() > give_up:
                raise RuntimeError(f"gate workers admit did not start: {self.log.read_text()[-1000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.admission is not None and self.admission.poll() is None:
            self.admission.send_signal(signal.SIGTERM)
            try:
                self.admission.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.admission.kill()
                self.admission.wait(timeout=10)


def watch(servers: list[Server], done: threading.Event) -> None:
    """Look at every server every 50 ms until `done` (a thread: the pings block for their reply window)."""
    while not done.is_set():
        for server in servers:
            server.look()
        done.wait(0.05)


def join_and_serve(servers: list[Server], token: str, url: str, cap: float) -> float:
    """Start every server at once with `token` and wait until each serves (or exited, or `cap` s passed);
    the t0 they were started at (monotonic)."""
    host = socket.gethostname()
    app = make_app(url)
    t0, t0_wall = time.monotonic(), time.time()
    for server in servers:
        server.start(token, t0, t0_wall)
    rounds: list[float] = []
    latency: list[float] = []
    done = threading.Event()
    watcher = threading.Thread(target=watch, args=(servers, done), daemon=True)
    watcher.start()
    try:
        while any(s.pending for s in servers) and time.monotonic() - t0 < cap:
            asked = {f"{s.name}@{host}": s for s in servers if s.pending and s.name}
            if not asked:
                time.sleep(0.05)
                continue

            def answered(reply: dict, asked: dict[str, Server] = asked) -> None:
                for who in reply:
                    if (server := asked.get(who)) is not None and server.serving_s is None:
                        server.serving_s = time.monotonic() - t0
                        latency.append(server.serving_s - rounds[-1])

            with contextlib.suppress(Exception):  # a broker hiccup: ask again
                rounds.append(time.monotonic() - t0)
                app.control.ping(timeout=PING_S, destination=list(asked), callback=answered)
    finally:
        done.set()
        watcher.join()
    for server in servers:
        server.look()
    gaps = [b - a for a, b in pairwise(rounds)]
    print(
        f"  {len(rounds)} ping rounds, {max(gaps, default=0):.2f} s apart at most; first replies "
        f"{' '.join(f'{x:.2f}' for x in sorted(latency))} s after their ping",
        file=sys.stderr,
    )
    return t0


def eleventh(tmp: Path, token: str) -> tuple[int, float, str]:
    """(exit code, seconds, last stderr line) of one more `gate-worker join` with the used-up token."""
    started = time.monotonic()
    done = subprocess.run(
        [*(GATE_WORKER, "join", token, "--no-serve", "--wait", "30"), "--key", str(tmp / "extra.key"),
         "--broker-file", str(tmp / "extra.broker.json")],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode, time.monotonic() - started, lines[-1] if lines else ""


def run_trials(url: str, registry: Path, tmp: Path, n: int, batch: int) -> dict:
    """`n` trivial trials through a CeleryExecutor reading `registry`, open to close (batches of `batch`): the
    seconds, the faults and the trials each worker answered."""
    tree = tmp / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "probe.py").write_text("print('{}')\n")
    fixture = b"{}"
    digest = hashlib.sha256(fixture).hexdigest()
    executor = CeleryExecutor(
        url, worker_wait_s=30, result_timeout_s=120, batch_size=batch, enrolled=lambda: load_roster(registry)
    )
    with LocalInputs(tree, {digest: fixture}) as inputs:
        specs = make_specs(
            n, run_id="fleet", tree_digest=inputs.tree_digest, fixture_digest=digest, image_id=executor.image_id()
        )
        started = time.monotonic()
        executor.open("fleet", Limits())
        try:
            seen = {o.key: o for o in executor.run(specs, inputs)}
        finally:
            executor.close("fleet")
        elapsed = time.monotonic() - started
    return {
        "seconds": elapsed,
        "back": len(seen),
        "faults": sum(1 for o in seen.values() if o.fault),
        "by_worker": Counter(o.worker_id or "?" for o in seen.values()),
        "events": Counter(e.kind for e in executor.events),
    }


def spread(values: list[float]) -> str:
    return f"{min(values):6.1f} {statistics.median(values):7.1f} {max(values):6.1f}"


def phases(server: Server) -> list[float | None]:
    """start -> request sent -> admitted -> image checked -> preflight ok -> serving: each step's seconds."""
    marks = [0.0, server.sent_s, server.admitted_s, server.image_s, server.preflight_s, server.serving_s]
    return [b - a if a is not None and b is not None else None for a, b in pairwise(marks)]


def describe(server: Server) -> str:
    steps = ", ".join(
        f"{label} {value:.1f}" if value is not None else f"{label} -"
        for label, value in zip(("sent", "admitted", "image", "preflight ok", "serving"), phases(server), strict=True)
    )
    left = f"; exited {server.exit_code}: {tail(server.log)}" if server.exit_code is not None else ""
    return f"{server.label} {server.name or '?'}: serving at {fmt(server.serving_s)} s ({steps}){left}"


def tail(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()] if path.exists() else []
    return " | ".join(lines[-3:])


def fmt(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=10, help="servers joining at once with one token")
    parser.add_argument("--within", type=float, default=60.0, help="the claim: all serve within this many s")
    parser.add_argument("--cap", type=float, default=180.0, help="the most the servers are waited for, in s")
    parser.add_argument("--run", action="store_true", help="then send trials through the fleet")
    parser.add_argument("--trials", type=int, default=40, help="trials sent with --run")
    parser.add_argument("--batch", type=int, default=2, help="trials per batch with --run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (the servers' logs)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="probegate-join-fleet-"))
    client = docker_client()
    redis = RedisServer(tmp / "redis")
    redis.start()
    coordinator = Coordinator(redis.url, tmp)
    solo = Server("solo", tmp)
    fleet = [Server(f"s{i + 1:02d}", tmp) for i in range(args.servers)]
    load = [os.getloadavg()[0]]
    result: dict = {}
    try:
        coordinator.admit()

        (row,) = coordinator.gate("invite", "--uses", "1", "--prefix", SOLO_PREFIX)
        print("one server joins alone ...", file=sys.stderr)
        join_and_serve([solo], row["token"], redis.url, args.cap)
        print(f"  {describe(solo)}", file=sys.stderr)
        solo.stop()
        solo.wait_stopped()
        sweep_dead_workers(client)
        if solo.name:
            coordinator.gate("revoke", solo.name)  # out of the fleet's roster: only the ten are enrolled
        load.append(os.getloadavg()[0])

        (row,) = coordinator.gate("invite", "--uses", str(args.servers), "--prefix", PREFIX)
        token, invite_id = row["token"], row["invite"]
        print(f"{args.servers} servers join at once with one {args.servers}-use token ...", file=sys.stderr)
        join_and_serve(fleet, token, redis.url, args.cap)
        load.append(os.getloadavg()[0])
        for server in fleet:
            print(f"  {describe(server)}", file=sys.stderr)

        listed = coordinator.gate("list")
        result["enrolled"] = sorted(
            r["name"] for r in listed if r["name"].startswith(f"{PREFIX}-") and r["state"] == "enrolled"
        )
        (result["invite"],) = [r for r in coordinator.gate("invites") if r["invite"] == invite_id]
        result["eleventh"] = eleventh(tmp, token)
        if args.run and all(s.serving_s is not None for s in fleet):
            print(f"{args.trials} trials through the fleet ...", file=sys.stderr)
            result["run"] = run_trials(redis.url, coordinator.registry, tmp, args.trials, args.batch)
        load.append(os.getloadavg()[0])
    finally:
        for server in [solo, *fleet]:
            server.stop()
        for server in [solo, *fleet]:
            server.wait_stopped()
        coordinator.stop()
        redis.stop()
        with contextlib.suppress(Exception):
            sweep_dead_workers(client)
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    report(args, solo, fleet, result, load)
    served = all(s.serving_s is not None for s in fleet)
    return 0 if served and result.get("eleventh", (None,))[0] == REFUSED else 1


def report(args: argparse.Namespace, solo: Server, fleet: list[Server], result: dict, load: list[float]) -> None:
    n = len(fleet)
    print(
        f"{n} servers joining at once with one {n}-use token against 1 alone; `gate-worker join`, concurrency 1, "
        f"Docker preflight each; 1-minute load {' / '.join(f'{x:.1f}' for x in load)}"
    )
    admitted = [s.admitted_s for s in fleet if s.admitted_s is not None]
    serving = [s.serving_s for s in fleet if s.serving_s is not None]
    print(f"{'':24}{'min':>6} {'median':>7} {'max':>6}")
    print(f"{'one alone: admitted s':24}{fmt(solo.admitted_s):>6}")
    print(f"{'one alone: serving s':24}{fmt(solo.serving_s):>6}")
    print(f"{f'{n} at once: admitted s':24}{spread(admitted) if admitted else '-':>6}  ({len(admitted)} of {n})")
    print(f"{f'{n} at once: serving s':24}{spread(serving) if serving else '-':>6}  ({len(serving)} of {n})")
    if len(serving) == n:
        everyone = max(serving)
        ratio = f"{everyone / solo.serving_s:.1f}" if solo.serving_s else "-"
        print(
            f"all {n} serving after {everyone:.1f} s: within {args.within:.0f} s: "
            f"{'yes' if everyone <= args.within else 'NO'}; {n} at once took {ratio} times one alone"
        )
    else:
        print(f"NOT all serving within the {args.cap:.0f} s cap: {len(serving)} of {n}")
    labels = ("start->sent", "sent->admitted", "admitted->image", "image->preflight ok", "preflight ok->serving")
    cells = []
    for i, label in enumerate(labels):
        values = [p[i] for s in fleet if (p := phases(s))[i] is not None]
        alone = phases(solo)[i]
        cells.append(f"{label} {statistics.median(values) if values else float('nan'):.1f} ({fmt(alone)})")
    print(f"phases, median of the {n} (one alone) in s: " + ", ".join(cells))
    if "enrolled" in result:
        invite = result["invite"]
        print(
            f"gate workers list: {len(result['enrolled'])} enrolled {PREFIX}-* workers; gate workers invites: "
            f"used {invite['used']}/{invite['uses']} ({invite['state']})"
        )
    if "eleventh" in result:
        code, seconds, line = result["eleventh"]
        verdict = "refused" if code == REFUSED else "NOT refused"
        print(f"join number {n + 1} with the same token: exit {code}, {verdict}, after {seconds:.1f} s: {line}")
    if "run" in result:
        run = result["run"]
        events = ", ".join(f"{k} x{v}" for k, v in sorted(run["events"].items())) or "none"
        print(
            f"--run: {run['back']} of {args.trials} trials back in {run['seconds']:.1f} s (batches of {args.batch}), "
            f"{run['faults']} faults, answered by {len(run['by_worker'])} distinct workers "
            f"({'/'.join(str(c) for _, c in sorted(run['by_worker'].items()))}); events: {events}"
        )


if __name__ == "__main__":
    sys.exit(main())
