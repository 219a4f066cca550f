"""A forger on statistical trials beside honest workers: how often it gets a failing row passed, with the
statistical replays on (the default share and 1), and off, against an all-honest fleet measured in the
same run; and what the replays cost in extra trials.

Each repetition is one run of a statistical row at the default band (8 hits of 10) through the run's own
cross-check code (`gate.run.crosscheck`) over an in-process fleet of worker callables
(`tests/support/fleet_model.py`: no Docker, no broker); the probe's truth is a draw from each trial's seed, at a
true rate just below the band. Forgers: `all` reports a hit on every statistical trial it runs (its own
and the replays it is sent: it cannot tell them apart); `enough` knows every trial's truth and flips the
fewest of its own misses that lift the pooled hits to the band, answering everything else honestly.
`slip` is built against replays sized to a stated escape (`[suite] replay_escape`): on a row whose truth fails
it flips as many of its own misses (at least enough to lift the row to the band) as give its lies the best chance,
by the replay rule's own sizing (`gate.core.trust.replay.unreplayed`), of all going unreplayed.
`honest` is the baseline: the same fleet with the forger replaced by an honest worker. The exact honest
rate, P(Binomial(10, rate) >= 8), is printed beside it. `accepted`: rows passed (every one of them a
failing property's: its true rate is below the band); `lie-made`: rows passed whose seeded truth has
fewer than 8 hits (passes the lies made); `extra trials`: replays, tie-breaks and reruns per primary.

Then the owned tier (`gate workers enrol --owned`, docs/explanation/trust.md "Owned workers"), whatever
`--workers` says: one stranger alone (a fleet shrunk to one: nobody to replay on), a stranger (honest, or either
forger) beside one owned worker `own` (the stranger runs every second trial as the liar does above; every second
run goes to `own`), and `own` alone, at the same rate, shares and runs; then by true rate at the default share.
`caught`: rows whose stranger was caught and every result it gave run again (on `own`); `on truth`: rows whose
kind is the seeded truth's (a pass at 8 true hits or more, else `inconclusive_sample`); `owned ran`: the share of
the second runs the owned worker answered.

Last, replays sized to a stated escape (`[suite] replay_escape`, 0 by default): the honest fleets' extra trials by
true rate at escapes 0, 0.1, 0.2 and 0.5, then each forger beside one honest stranger, two, and an owned worker at
`--rate`; `fail->pass`: rows passed whose seeded truth fails, over rows whose truth fails (the bound: at most the
escape).

    .venv/bin/python -m benchmarks.forger_statistical [--runs 400] [--rate 0.75] [--workers 2]

`benchmarks/forger_celery.py` runs the same configuration through real enrolled workers and checks it
against this model (`measure(..., processes=2)`: the primaries batched and assigned as Celery sends them).
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace

from gate.core.suite.batching import batches
from gate.core.suite.trial import TrialSpec
from gate.core.trust.assignment import Rotation, assign
from gate.core.trust.replay import unreplayed
from gate.core.verdicts.bands import FixedRule
from gate.core.verdicts.verdict import Kind
from tests.support.fleet_model import FakeFleet, RowResult, run_row, specs_for, truth
from worker.celery.coordinator.dispatch import CeleryExecutor
from worker.celery.shared.app import VISIBILITY_TIMEOUT_S

RULE = FixedRule()  # the default band
DEFAULT_SHARE = 0.05  # `[suite] cross_check`'s default
Forger = Callable[[list[TrialSpec], Callable[[TrialSpec], bool], list[str]], Callable[[TrialSpec, str], bool]]


def honest_forger(specs: list[TrialSpec], real: Callable[[TrialSpec], bool], names: list[str]):
    return lambda spec, _worker: real(spec)


def all_forger(specs: list[TrialSpec], real: Callable[[TrialSpec], bool], names: list[str]):
    return lambda spec, _worker: True


def enough_forger(specs: list[TrialSpec], real: Callable[[TrialSpec], bool], names: list[str]):
    need = RULE.min_hits - sum(real(s) for s in specs)
    own = [s.trial_index for n, s in enumerate(specs) if names[n % len(names)] == "liar" and not real(s)]
    lies = set(own[: max(0, need)])
    return lambda spec, _worker: spec.trial_index in lies or real(spec)


def slip_forger(specs: list[TrialSpec], real: Callable[[TrialSpec], bool], names: list[str], escape: float = 0.0):
    true_hits = sum(real(s) for s in specs)
    mine = [s for n, s in enumerate(specs) if names[n % len(names)] == "liar"]
    own = [s.trial_index for s in mine if not real(s)]
    hits = len(mine) - len(own)
    best, lies = -1.0, set()
    for count in range(RULE.min_hits - true_hits, len(own) + 1) if true_hits < RULE.min_hits else ():
        kept = unreplayed(hits + count, true_hits + count - RULE.min_hits, escape)
        chance = math.comb(kept, count) / math.comb(hits + count, count)
        if chance > best:
            best, lies = chance, set(own[:count])
    return lambda spec, _worker: spec.trial_index in lies or real(spec)


FORGERS: dict[str, Forger] = {
    "honest": honest_forger,
    "all": all_forger,
    "enough": enough_forger,
    "slip": slip_forger,
}


class AssignedFleet(FakeFleet):
    """The fleet with its primaries sent as the Celery coordinator sends them to enrolled workers: batches of
    the executor's own size for `processes` worker processes, assigned round the workers in name order."""

    def __init__(self, workers, rng: random.Random, processes: int, owned: Sequence[str] = ()) -> None:
        super().__init__(workers, rng, owned=owned)
        self.processes = processes

    def run(self, specs, inputs):
        # The executor's sizing rule itself (it reads only these two attributes), not a copy of it.
        sizing = SimpleNamespace(batch_size=None, visibility_timeout_s=VISIBILITY_TIMEOUT_S)
        groups = batches(specs, CeleryExecutor.batch_size_for(sizing, specs, self.processes))  # type: ignore[arg-type]
        round_ = Rotation(tuple(sorted(self.names)), owned=self.trusted_workers)
        chosen, _ = assign(round_, [group[0].property_id for group in groups])
        for group, worker in zip(groups, chosen, strict=True):
            for spec in group:
                yield self._answer(spec, worker)


def one(
    run_id: str,
    forger: Forger,
    rate: float,
    workers: int,
    share: float,
    rng: random.Random,
    processes: int = 0,
    *,
    names: Sequence[str] = (),
    owned: Sequence[str] = (),
    escape: float = 0.0,
) -> RowResult:
    """One row; `processes` > 0: primaries batched and assigned as Celery does (else one trial per worker in turn).
    `names` (in the round's order) replaces the liar and workers-1 honest workers: `liar` answers as `forger`,
    any other honestly; `owned` are the registry's owned workers among them."""
    specs = specs_for(run_id, RULE)
    real = truth(rate)
    # Named so that in name order (the coordinator's round) the honest workers come first, as box-honest
    # before box-liar in benchmarks/forger_celery.py.
    names = list(names) or ["liar", *(f"honest{k}" for k in range(1, workers))]
    lying = partial(forger, escape=escape)(specs, real, names) if forger is slip_forger else forger(specs, real, names)
    answers = {n: (lying if n == "liar" else (lambda s, _w: real(s))) for n in names}
    fleet = AssignedFleet(answers, rng, processes, owned) if processes else FakeFleet(answers, rng, owned=owned)
    return run_row(fleet, specs, RULE, share=share, seed=f"{rng.getrandbits(64):x}", escape=escape)


@dataclass(frozen=True)
class Figures:
    """One line's figures over its runs."""

    accepted: float  # rows passed
    lie_made: float  # rows passed whose seeded truth does not pass
    extra: float  # trials besides the primaries (replays, tie-breaks, reruns) per primary
    caught: float  # rows whose liar was caught: every result it gave discarded and run again
    on_truth: float  # rows whose kind is the seeded truth's: a pass at 8 true hits or more, else a sample short
    owned_ran: float  # of the second runs, the share owned workers answered (nan: none ran)
    fail_pass: float  # of the rows whose seeded truth fails, the share passed (nan: none failed)


def figures(
    forger: str,
    rate: float,
    workers: int,
    share: float,
    runs: int,
    seed: int,
    processes: int = 0,
    *,
    names: Sequence[str] = (),
    owned: Sequence[str] = (),
    escape: float = 0.0,
) -> Figures:
    """`runs` rows of `forger` at `rate` (the fleet of `one`), each run id and seed as `measure` draws them."""
    rng = random.Random(seed)
    passed = false = failing = extra = primaries = caught = on_truth = by_owned = seconds = 0
    for n in range(runs):
        run_id = f"bench-{seed}-{n}"
        result = one(
            run_id, FORGERS[forger], rate, workers, share, rng, processes, names=names, owned=owned, escape=escape
        )
        ok = result.kind is Kind.PASS
        passed += ok
        true_hits = sum(truth(rate)(s) for s in specs_for(run_id, RULE))
        false += ok and true_hits < RULE.min_hits
        failing += true_hits < RULE.min_hits
        true_kind = Kind.PASS if true_hits >= RULE.min_hits else Kind.INCONCLUSIVE_SAMPLE
        on_truth += result.kind is true_kind
        caught += "liar" in result.summary.discarded
        by_owned += sum(ran for worker, ran in result.summary.verified_by.items() if worker in owned)
        seconds += sum(result.summary.verified_by.values())
        extra += result.extra
        primaries += result.primaries
    return Figures(
        accepted=passed / runs,
        lie_made=false / runs,
        extra=extra / primaries,
        caught=caught / runs,
        on_truth=on_truth / runs,
        owned_ran=by_owned / seconds if seconds else math.nan,
        fail_pass=false / failing if failing else math.nan,
    )


def measure(
    forger: str, rate: float, workers: int, share: float, runs: int, seed: int, processes: int = 0
) -> tuple[float, float, float]:
    """Acceptance rate, false passes (rows passed whose seeded truth does not) and extra trials per primary."""
    got = figures(forger, rate, workers, share, runs, seed, processes)
    return got.accepted, got.lie_made, got.extra


# The owned tier's fleets: (label, forger, names in the round's order, owned names). The stranger is named `liar`
# whatever it does, so that it takes the trials the liar takes above (every second one, from the first).
OWNED_FLEETS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("stranger alone", "honest", ("liar",), ()),
    ("forger (all) alone", "all", ("liar",), ()),
    ("honest stranger + owned", "honest", ("liar", "own"), ("own",)),
    ("forger (all) + owned", "all", ("liar", "own"), ("own",)),
    ("forger (enough) + owned", "enough", ("liar", "own"), ("own",)),
    ("owned alone", "honest", ("own",), ("own",)),
)
RATES = (0.5, 0.75, 0.9, 0.95, 1.0)


def owned_line(label: str, column: str, got: Figures, base: float) -> str:
    ratio = got.accepted / base if base else float("nan")
    ran = "-" if math.isnan(got.owned_ran) else f"{got.owned_ran:.2f}"
    return (
        f"{label:<28}{column:<16}{got.accepted:>9.3f}{got.lie_made:>10.3f}{ratio:>11.2f}{got.caught:>8.3f}"
        f"{got.on_truth:>10.3f}{got.extra:>13.2f}x{ran:>11}"
    )


def owned_tables(rate: float, runs: int, seed: int, base: float) -> None:
    print(
        f"owned workers (gate workers enrol --owned): a stranger alone, beside one owned worker, and the owned "
        f"one alone; true rate {rate}, {runs} runs each"
    )
    header = f"{'accepted':>9}{'lie-made':>10}{'vs honest':>11}{'caught':>8}{'on truth':>10}{'extra trials':>14}"
    print(f"{'fleet':<28}{'replays':<16}{header}{'owned ran':>11}")
    for label, forger, names, owned in OWNED_FLEETS:
        for column, share in (("off (share 0)", 0.0), (f"default ({DEFAULT_SHARE})", DEFAULT_SHARE), ("share 1", 1.0)):
            got = figures(forger, rate, len(names), share, runs, seed, names=names, owned=owned)
            print(owned_line(label, column, got, base))
    print(f"owned fleets by true rate, default share ({DEFAULT_SHARE}), {runs // 2} runs each; forgers below the band:")
    print(f"{'fleet':<28}{'rate (exact)':<16}{header}{'owned ran':>11}")
    honest = {at: figures("honest", at, 2, DEFAULT_SHARE, runs // 2, seed).accepted for at in RATES}
    for label, forger, names, owned in OWNED_FLEETS:
        for at in RATES:
            if forger != "honest" and at >= RULE.min_hits / RULE.trials:
                continue
            got = figures(forger, at, len(names), DEFAULT_SHARE, runs // 2, seed, names=names, owned=owned)
            print(owned_line(label, f"{at} ({exact_pass(at):.3f})", got, honest[at]))


ESCAPES = (0.0, 0.1, 0.2, 0.5)
# (label, forger, names in the round's order, owned names): the fleets of the escape tables.
ESCAPE_FLEETS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("2 honest", "honest", ("liar", "honest1"), ()),
    ("3 honest", "honest", ("liar", "honest1", "honest2"), ()),
    ("honest stranger + owned", "honest", ("liar", "own"), ("own",)),
)
BESIDE: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("1 honest", ("liar", "honest1"), ()),
    ("2 honest", ("liar", "honest1", "honest2"), ()),
    ("owned", ("liar", "own"), ("own",)),
)


def escape_tables(rate: float, runs: int, seed: int) -> None:
    half = runs // 2
    print(f"replays sized to a stated escape ([suite] replay_escape), default share ({DEFAULT_SHARE}):")
    print(f"honest extra trials per primary by true rate, {half} runs each:")
    print(f"{'fleet':<26}{'escape':>7}" + "".join(f"{f'rate {at}':>11}" for at in RATES) + f"{'worst':>8}")
    for label, forger, names, owned in ESCAPE_FLEETS:
        for escape in ESCAPES:
            extra = [
                figures(
                    forger, at, len(names), DEFAULT_SHARE, half, seed, names=names, owned=owned, escape=escape
                ).extra
                for at in RATES
            ]
            print(f"{label:<26}{escape:>7}" + "".join(f"{x:>10.2f}x" for x in extra) + f"{max(extra):>7.2f}x")
    print(f"forgers at true rate {rate}, {runs} runs each:")
    print(f"{'forger':<10}{'beside':<10}{'escape':>7}{'accepted':>10}{'lie-made':>10}{'fail->pass':>12}{'extra':>9}")
    for forger in ("all", "enough", "slip"):
        for label, names, owned in BESIDE:
            for escape in ESCAPES:
                got = figures(
                    forger, rate, len(names), DEFAULT_SHARE, runs, seed, names=names, owned=owned, escape=escape
                )
                print(
                    f"{forger:<10}{label:<10}{escape:>7}{got.accepted:>10.3f}{got.lie_made:>10.3f}"
                    f"{got.fail_pass:>12.3f}{got.extra:>8.2f}x"
                )


def exact_pass(rate: float) -> float:
    n, k = RULE.trials, RULE.min_hits
    return sum(math.comb(n, i) * rate**i * (1 - rate) ** (n - i) for i in range(k, n + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--rate", type=float, default=0.75, help="the probe's true hit rate (band: 0.8)")
    parser.add_argument("--workers", type=int, default=2, help="the forger and workers-1 honest workers")
    parser.add_argument("--seed", type=int, default=20261205)
    args = parser.parse_args()
    print(
        f"band {RULE.min_hits}/{RULE.trials}, true rate {args.rate}, {args.workers} workers, {args.runs} runs each; "
        f"exact honest pass rate {exact_pass(args.rate):.3f}"
    )
    base, _, _ = measure("honest", args.rate, args.workers, DEFAULT_SHARE, args.runs, args.seed)
    print(f"{'fleet':<28}{'replays':<16}{'accepted':>9}{'lie-made':>10}{'vs honest':>11}{'extra trials':>14}")
    for forger in ("honest", "all", "enough"):
        for label, share in (("off (share 0)", 0.0), (f"default ({DEFAULT_SHARE})", DEFAULT_SHARE), ("share 1", 1.0)):
            accepted, false, extra = measure(forger, args.rate, args.workers, share, args.runs, args.seed)
            ratio = accepted / base if base else float("nan")
            who = "all honest" if forger == "honest" else f"forger ({forger}) + honest"
            print(f"{who:<28}{label:<16}{accepted:>9.3f}{false:>10.3f}{ratio:>11.2f}{extra:>13.2f}x")
    print("extra trials for honest fleets (replays per primary trial), by true rate:")
    for rate in RATES:
        costs = [
            measure("honest", rate, args.workers, share, args.runs // 2, args.seed)[2] for share in (DEFAULT_SHARE, 1.0)
        ]
        print(f"  rate {rate:<5} default share {costs[0]:.2f}x   share 1 {costs[1]:.2f}x")
    owned_tables(args.rate, args.runs, args.seed, base)
    escape_tables(args.rate, args.runs, args.seed)


if __name__ == "__main__":
    main()
