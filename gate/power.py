"""What a band rule means before anyone pays for it: its operating characteristics, computed
exactly by dynamic programming over the trial sequence (no simulation).

For a true hit rate, the state is the distribution of hits after each wave the coordinator would
dispatch (`rule.next_wave`), checked with the very `rule.decide` the fold uses; a fixed rule is
one wave of N (the binomial tail). `window_effect` turns the chance of an inconclusive sample into
the chance that the sampler window (more than `max_inconclusive` in `size`) trips the job.

The computations are pure. `power_main` / `run_from_args` are the `gate power` command: they
print the table to stdout and write the plot file, and nothing else here touches I/O.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from gate.bands import BandRule, FixedRule, SprtRule
from gate.errors import RET_OK, UsageError


class OCPoint(BaseModel):
    """A rule's behaviour at one true hit rate: outcome probabilities and trial counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    rate: float
    p_pass: float
    p_below: float  # decided below the band (for a fixed rule: every non-pass)
    p_undecided: float  # SPRT only: still undecided at max_trials
    expected_trials: float
    p95_trials: int

    @property
    def p_inconclusive(self) -> float:
        """The chance of an inconclusive_sample verdict: below the band or undecided."""
        return self.p_below + self.p_undecided


def binomial_pmf(n: int, p: float) -> list[float]:
    """P(X = k) for k = 0..n with X ~ Bin(n, p), in log space so large n does not overflow."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"rate {p} outside [0, 1]")
    if p in (0.0, 1.0):
        return [1.0 if k == round(p * n) else 0.0 for k in range(n + 1)]
    lp, lq, lgn = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    return [math.exp(lgn - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq) for k in range(n + 1)]


def operating_characteristic(rule: BandRule, rate: float) -> OCPoint:
    """The exact outcome probabilities and trial-count distribution of `rule` at one true rate."""
    frontier: dict[int, list[float]] = {0: [1.0]}
    p_pass = p_below = p_undecided = 0.0
    stopped: dict[int, float] = {}
    while frontier:
        trials = min(frontier)
        for hits, mass in enumerate(frontier.pop(trials)):
            if mass == 0.0:
                continue
            decision = rule.decide(hits=hits, trials=trials)
            if decision.final:
                stopped[trials] = stopped.get(trials, 0.0) + mass
                if decision.passed:
                    p_pass += mass
                elif isinstance(rule, SprtRule) and rule.state(hits, trials) == "undecided":
                    p_undecided += mass
                else:
                    p_below += mass
                continue
            wave = rule.next_wave(hits, trials)
            if wave <= 0:
                raise ValueError(f"rule is not final at {hits}/{trials} but dispatches no trials")
            target = frontier.setdefault(trials + wave, [0.0] * (trials + wave + 1))
            for more, q in enumerate(binomial_pmf(wave, rate)):
                target[hits + more] += mass * q
    expected = sum(n * m for n, m in stopped.items())
    cumulative, p95 = 0.0, max(stopped)
    for n in sorted(stopped):
        cumulative += stopped[n]
        if cumulative >= 0.95 - 1e-12:
            p95 = n
            break
    return OCPoint(
        rate=rate, p_pass=p_pass, p_below=p_below, p_undecided=p_undecided, expected_trials=expected, p95_trials=p95
    )


def operating_characteristics(rule: BandRule, rates: Sequence[float]) -> list[OCPoint]:
    """`operating_characteristic` at each of `rates`, in order."""
    return [operating_characteristic(rule, rate) for rate in rates]


def window_effect(p_inconclusive: float, size: int = 20, max_inconclusive: int = 4) -> float:
    """The chance a window of `size` independent verdicts holds more than `max_inconclusive`."""
    if size < 1 or max_inconclusive < 0:
        raise ValueError(f"window size {size} / budget {max_inconclusive} out of range")
    return min(1.0, sum(binomial_pmf(size, p_inconclusive)[max_inconclusive + 1 :]))


def smallest_fixed_n(p0: float, p1: float, alpha: float, beta: float, limit: int = 100_000) -> tuple[int, int]:
    """The smallest (n, min_hits) fixed test with P(fail | p0) <= alpha and P(pass | p1) <= beta."""
    if not 0 < p1 < p0 < 1 or not 0 < alpha < 1 or not 0 < beta < 1:
        raise ValueError(f"need 0 < p1 < p0 < 1 and 0 < alpha, beta < 1 (got {p0}, {p1}, {alpha}, {beta})")
    for n in range(1, limit + 1):
        at_p1, at_p0 = binomial_pmf(n, p1), binomial_pmf(n, p0)
        tail, k = 0.0, n + 1  # smallest k with P(X >= k | p1) <= beta
        while k > 0 and tail + at_p1[k - 1] <= beta:
            k -= 1
            tail += at_p1[k]
        if k <= n and sum(at_p0[:k]) <= alpha:
            return n, k
    raise ValueError(f"no fixed test of at most {limit} trials reaches those error rates")


def power_table(points: Sequence[OCPoint], size: int = 20, max_inconclusive: int = 4) -> str:
    """The `gate power` table: one row per rate, with the chance the sampler window trips."""
    head = f"{'rate':>6} {'P(pass)':>9} {'P(inconc)':>10} {'E[trials]':>10} {'p95':>6} {'P(window trips)':>16}"
    rows = [head]
    for pt in points:
        trips = window_effect(pt.p_inconclusive, size, max_inconclusive)
        rows.append(
            f"{pt.rate:>6.3f} {pt.p_pass:>9.4f} {pt.p_inconclusive:>10.4f} {pt.expected_trials:>10.2f} "
            f"{pt.p95_trials:>6d} {trips:>16.4f}"
        )
    return "\n".join(rows)


def plot_svg(points: Sequence[OCPoint], title: str) -> str:
    """An SVG document: P(pass) and P(inconclusive) vs rate above, E[trials] and p95 trials below."""
    if not points:
        raise ValueError("nothing to plot")
    width, left, right, panel, gap, top = 640, 60, 20, 200, 60, 40
    x0, x1 = min(p.rate for p in points), max(p.rate for p in points)
    x1 = x1 if x1 > x0 else x0 + 1e-9
    tmax = max(max(p.p95_trials for p in points), 1)

    def sx(rate: float) -> float:
        return left + (rate - x0) / (x1 - x0) * (width - left - right)

    def panel_svg(y_top: float, ymax: float, series: list[tuple[str, str, list[float]]], label: str) -> list[str]:
        def sy(v: float) -> float:
            return y_top + panel - v / ymax * panel

        out = [
            f'<rect x="{left}" y="{y_top}" width="{width - left - right}" height="{panel}" fill="none" stroke="#999"/>'
        ]
        for i in range(5):
            v = ymax * i / 4
            out.append(f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
        out.append(
            f'<text x="12" y="{y_top + panel / 2}" transform="rotate(-90 12 {y_top + panel / 2})">{label}</text>'
        )
        for n, (name, colour, values) in enumerate(series):
            coords = " ".join(f"{sx(p.rate):.1f},{sy(v):.1f}" for p, v in zip(points, values, strict=True))
            out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
            at = f'x="{width - right - 8}" y="{y_top + 16 + 14 * n}"'
            out.append(f'<text {at} text-anchor="end" fill="{colour}">{name}</text>')
        return out

    lines = [f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
    lines += panel_svg(
        top,
        1.0,
        [
            ("P(pass)", "#1f77b4", [p.p_pass for p in points]),
            ("P(inconclusive)", "#d62728", [p.p_inconclusive for p in points]),
        ],
        "probability",
    )
    lines += panel_svg(
        top + panel + gap,
        float(tmax),
        [
            ("E[trials]", "#2ca02c", [p.expected_trials for p in points]),
            ("p95 trials", "#ff7f0e", [float(p.p95_trials) for p in points]),
        ],
        "trials",
    )
    bottom = top + 2 * panel + gap
    for p in points:
        lines.append(f'<text x="{sx(p.rate):.1f}" y="{bottom + 16}" text-anchor="middle">{p.rate:.2f}</text>')
    lines.append(f'<text x="{width / 2}" y="{bottom + 36}" text-anchor="middle">true hit rate</text>')
    height = bottom + 50
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            'font-family="sans-serif" font-size="11">',
            *lines,
            "</svg>",
            "",
        ]
    )


# --- the `gate power` command ---------------------------------------------------------------------

_SPRT_ARGS = ("p0", "p1", "alpha", "beta", "max_trials", "wave")
_FIXED_ARGS = ("trials", "min_hits")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would exit 2, which means "harness broken" here
        raise UsageError(f"{self.prog}: {message}")


def add_power_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `power` to the `gate` command's subparsers."""
    parser = subparsers.add_parser("power", help="print (and plot) a band rule's operating characteristics")
    _add_arguments(parser)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rule", choices=["fixed", "sprt"], default="fixed")
    parser.add_argument("--trials", type=int, help="fixed: trials (default 10)")
    parser.add_argument("--min-hits", type=int, help="fixed: hits needed to pass (default 8)")
    for name in ("p0", "p1", "alpha", "beta"):
        parser.add_argument(f"--{name}", type=float, help=f"sprt: {name}")
    parser.add_argument("--max-trials", type=int, help="sprt: trial cap")
    parser.add_argument("--wave", type=int, help="sprt: trials per wave (default 5)")
    parser.add_argument("--rates", default="0.5:0.95:0.05", help="START:STOP:STEP (inclusive) or a comma list")
    parser.add_argument("--window", type=int, default=20, help="sampler window size (default 20)")
    parser.add_argument("--max-inconclusive", type=int, default=4, help="sampler budget (default 4)")
    parser.add_argument("--plot", type=Path, metavar="FILE.svg", help="also write an SVG plot")


def parse_rates(text: str) -> list[float]:
    """`START:STOP:STEP` (inclusive) or `a,b,c` as a list of rates in [0, 1]."""
    try:
        if ":" in text:
            start, stop, step = (float(part) for part in text.split(":"))
            if step <= 0 or stop < start:
                raise ValueError
            rates = [round(start + i * step, 10) for i in range(math.floor((stop - start) / step + 1e-9) + 1)]
        else:
            rates = [float(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"{text!r} is not START:STOP:STEP or a comma list", field="--rates") from None
    if not rates or any(not 0.0 <= r <= 1.0 for r in rates):
        raise UsageError(f"rates must lie in [0, 1], got {text!r}", field="--rates")
    return rates


def rule_from_args(args: argparse.Namespace) -> FixedRule | SprtRule:
    """The band rule the command line describes; a key of the other rule is a usage error."""
    own, other = (_SPRT_ARGS, _FIXED_ARGS) if args.rule == "sprt" else (_FIXED_ARGS, _SPRT_ARGS)
    stray = [f"--{name.replace('_', '-')}" for name in other if getattr(args, name) is not None]
    if stray:
        raise UsageError(f"{', '.join(stray)} do not apply to --rule {args.rule}")
    fields = {name: getattr(args, name) for name in own if getattr(args, name) is not None}
    try:
        return TypeAdapter(BandRule).validate_python({"rule": args.rule, **fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "--" + str(first["loc"][-1]).replace("_", "-") if first["loc"][1:] else f"--rule {args.rule}"
        raise UsageError(first["msg"].removeprefix("Value error, "), field=where) from None


def run_from_args(args: argparse.Namespace) -> int:
    """Print the table for the rule on the command line, and write the plot when asked."""
    rule = rule_from_args(args)
    rates = parse_rates(args.rates)
    if args.window < 1 or args.max_inconclusive < 0:
        raise UsageError("--window must be at least 1 and --max-inconclusive at least 0")
    points = operating_characteristics(rule, rates)
    print(f"rule: {rule.model_dump_json()}")
    if isinstance(rule, SprtRule):
        n, k = smallest_fixed_n(rule.p0, rule.p1, rule.alpha, rule.beta)
        print(f"smallest fixed test with the same alpha, beta: {k} of {n}")
    print(f"window: more than {args.max_inconclusive} inconclusive in {args.window} trips the job")
    print(power_table(points, args.window, args.max_inconclusive))
    if args.plot:
        try:
            params = " ".join(f"{key}={value}" for key, value in rule.model_dump(exclude={"rule"}).items())
            args.plot.write_text(plot_svg(points, f"gate power: {rule.rule} {params}"))
        except OSError as exc:
            raise UsageError(f"cannot write the plot: {exc.strerror}", file=str(args.plot), field="--plot") from None
    return RET_OK


def power_main(argv: Sequence[str] | None = None) -> int:
    """`gate power …` on its own: parse `argv` and run; usage errors raise UsageError."""
    parser = _Parser(prog="gate power", description="Operating characteristics of a statistical band rule.")
    _add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
