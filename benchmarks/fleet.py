"""A fleet at internet distance: trials/s with every worker 100 ms from Redis against the same workers on the LAN.

Servers simulated on one machine: a private redis-server and `--workers` enrolled `gate-worker serve` processes on
real Docker (w1, w2, ..., each under its own broker ACL user, concurrency 1 unless `--concurrency`), driven by a
`CeleryExecutor` reading the registry (it always reaches Redis directly, as a coordinator beside its broker).
Each round times two runs of the same suite, open to close, each after an 8-trial warm-up run of its own:

- LAN: the workers connect to Redis directly;
- far: the same workers (same names, keys, broker users and caches), started again with their broker URL pointed
  at a delay proxy (`tests/support/delayproxy.py`) that holds every chunk `--delay-ms` in each direction (100 ms
  round trip by default).

The suite: `--trials` trials (400) over `--properties` properties (20, of 20 trials each), a trivial probe that
prints a line. Reported: trials/s of each run and the ratio far/LAN (the issue's target: at least 0.8), with the
trials each worker ran and the batches sent.

Also (b): the honest replay overhead, extra trials (replays, tie-breaks, reruns) per statistical trial, read from
the fleet model as `benchmarks/forger_statistical.py` measures it (the run's own cross-check code, in process), for
honest 2- and 3-worker fleets and an honest stranger beside an owned worker, at the default share, by true rate.
(c) a slowed worker is `benchmarks/straggler.py`.

    .venv/bin/python -m benchmarks.fleet [--workers 2] [--trials 400] [--delay-ms 50] [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.common import bench_fleet, start_fleet, timed_run
from benchmarks.forger_statistical import DEFAULT_SHARE, RATES, figures
from gate.io.snapshot import LocalInputs
from tests.support.delayproxy import DelayProxy

PROBE = "print('ok')\n"
# (label, worker names in the coordinator's round, owned ones) for (b); names as forger_statistical's honest fleets.
REPLAY_FLEETS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("2 honest workers", ("liar", "honest1"), ()),
    ("3 honest workers", ("liar", "honest1", "honest2"), ()),
    ("honest stranger + owned", ("liar", "own"), ("own",)),
)


def phase(label: str, round_: int, ctx: dict) -> dict:
    """A warm-up run, then the timed one (with what the workers sent through the proxy meanwhile)."""
    timed_run(ctx["url"], ctx["registry"], f"warm-{label}-{round_}", 8, 2, ctx["inputs"], ctx["digest"])
    args, proxy = ctx["args"], ctx["proxy"]
    before = proxy.requests
    row = timed_run(
        ctx["url"], ctx["registry"], f"{label}-{round_}", args.trials, args.properties, ctx["inputs"], ctx["digest"]
    )
    row["requests"] = proxy.requests - before
    through = f", {row['requests'] / row['batches']:.1f} worker requests through the proxy a batch" * (label == "far")
    print(
        f"  round {round_ + 1} {label}: {row['elapsed']:.1f} s, {row['rate']:.1f} trials/s, trials per worker "
        f"{row['split']}, {row['batches']} batches of <= {row['batch_size']}{through}, "
        f"events {dict(row['events']) or '-'}",
        file=sys.stderr,
    )
    return row


def lost_per_batch(lan_row: dict, far_row: dict, workers: int) -> float:
    """The seconds the far run took beyond the LAN run, per batch each worker ran in turn."""
    return (far_row["elapsed"] - lan_row["elapsed"]) / (far_row["batches"] / workers)


def replay_overhead(runs: int, seed: int) -> None:
    """(b): extra trials per statistical trial of honest fleets, from the fleet model."""
    print(f"(b) honest replay overhead, fleet model, default share ({DEFAULT_SHARE}), {runs} rows per cell:")
    print(f"{'fleet':<26}" + "".join(f"{f'rate {rate}':>11}" for rate in RATES) + f"{'worst':>8}")
    for label, names, owned in REPLAY_FLEETS:
        extra = [
            figures("honest", rate, len(names), DEFAULT_SHARE, runs, seed, names=names, owned=owned).extra
            for rate in RATES
        ]
        print(f"{label:<26}" + "".join(f"{x:>10.2f}x" for x in extra) + f"{max(extra):>7.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--properties", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=50.0, help="one way: a round trip costs twice this")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of LAN + far")
    parser.add_argument("--concurrency", type=int, default=1, help="processes per worker")
    parser.add_argument("--replay-runs", type=int, default=200, help="rows per cell of (b); 0: skip (b)")
    parser.add_argument("--seed", type=int, default=20261206)
    args = parser.parse_args()

    names = [f"w{k}" for k in range(1, args.workers + 1)]
    rows: list[tuple[dict, dict]] = []
    with bench_fleet("fleet", PROBE, names) as fleet:
        proxy = DelayProxy(fleet.redis.port, args.delay_ms / 1000)
        try:
            workers = fleet.workers
            lan = {name: workers.urls[name] for name in names}
            far = {name: proxy.url(url) for name, url in lan.items()}
            with LocalInputs(fleet.tree, {fleet.digest: fleet.fixture}) as inputs:
                ctx = {"url": fleet.redis.url, "registry": fleet.registry, "inputs": inputs, "digest": fleet.digest}
                ctx.update(args=args, proxy=proxy)
                for round_ in range(args.repeat):
                    start_fleet(workers, names, lan, args.concurrency)
                    lan_row = phase("lan", round_, ctx)
                    start_fleet(workers, names, far, args.concurrency)
                    far_row = phase("far", round_, ctx)
                    rows.append((lan_row, far_row))
        finally:
            workers.stop_all()
            proxy.close()

    print(
        f"(a) {args.trials} trials a run over {args.properties} properties, {args.workers} enrolled workers of "
        f"concurrency {args.concurrency} on Docker; far: {args.delay_ms:.0f} ms each way "
        f"({2 * args.delay_ms:.0f} ms round trip) between the workers and Redis"
    )
    header = f"{'round':>5}{'LAN s':>8}{'LAN t/s':>9}{'far s':>8}{'far t/s':>9}{'far/LAN':>9}{'batches':>9}"
    print(f"{header}{'s lost/batch/worker':>21}{'requests/batch':>16}")
    for k, (lan_row, far_row) in enumerate(rows, 1):
        print(
            f"{k:>5}{lan_row['elapsed']:>8.1f}{lan_row['rate']:>9.1f}{far_row['elapsed']:>8.1f}{far_row['rate']:>9.1f}"
            f"{far_row['rate'] / lan_row['rate']:>9.2f}{far_row['batches']:>9}"
            f"{lost_per_batch(lan_row, far_row, args.workers):>21.2f}{far_row['requests'] / far_row['batches']:>16.1f}"
        )
    if args.replay_runs:
        replay_overhead(args.replay_runs, args.seed)
    print("(c) a slowed worker: benchmarks/straggler.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
