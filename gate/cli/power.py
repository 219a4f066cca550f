"""`gate power`: print a band rule's operating characteristics and plot them.

The numbers come from `gate.core.verdicts.power` (pure, exact); this module is the command line and the plot,
drawn with matplotlib (the `plot` extra) in the format the file name asks for.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.errors import RET_OK, UsageError
from gate.core.escaping import one_line

if TYPE_CHECKING:  # pydantic and the models load only when `gate power` runs (argument parsing stays cheap)
    from gate.core.verdicts.bands import FixedRule, SprtRule
    from gate.core.verdicts.paired import PairedRule
    from gate.core.verdicts.power import OCPoint

_SPRT_ARGS = ("p0", "p1", "alpha", "beta", "max_trials", "wave")
_FIXED_ARGS = ("trials", "min_hits")
_PAIRED_ARGS = ("margin", "alpha", "beta", "max_pairs", "wave")
_RULE_ARGS = {"fixed": _FIXED_ARGS, "sprt": _SPRT_ARGS, "paired": _PAIRED_ARGS}
_PAIR_LAW_ARGS = ("base_rate", "coupling")  # the paired rule's table: the true base rate, how pairs go together


def add_power_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `power` to the `gate` command's subparsers."""
    parser = subparsers.add_parser("power", help="print (and plot) a band rule's operating characteristics")
    parser.set_defaults(handler="gate.cli.power:run_from_args")
    _add_arguments(parser)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rule", choices=["fixed", "sprt", "paired"], default="fixed")
    parser.add_argument("--trials", type=int, help="fixed: trials (default 10)")
    parser.add_argument("--min-hits", type=int, help="fixed: hits needed to pass (default 8)")
    for name in ("p0", "p1", "alpha", "beta"):
        parser.add_argument(f"--{name}", type=float, help=f"sprt: {name}")
    parser.add_argument("--max-trials", type=int, help="sprt: trial cap")
    parser.add_argument("--wave", type=int, help="sprt: trials per wave (default 5); paired: pairs (default 10)")
    parser.add_argument("--margin", type=float, help="paired: how much worse than the base is worse")
    parser.add_argument("--max-pairs", type=int, help="paired: pair cap")
    parser.add_argument("--base-rate", type=float, help="paired: the base's true hit rate (--rates: the patch's)")
    parser.add_argument("--coupling", choices=["independent", "shared"], help="paired: how a pair's sides go together")
    parser.add_argument("--rates", default="0.5:0.95:0.05", help="START:STOP:STEP (inclusive) or a comma list")
    parser.add_argument("--window", type=int, default=20, help="sampler window size (default 20)")
    parser.add_argument("--max-inconclusive", type=int, default=4, help="sampler budget (default 4)")
    parser.add_argument("--plot", type=Path, metavar="FILE", help="also write a plot (.svg or .png)")


MAX_RATES = 1001  # 0:1:0.001; each rate is a row of the table and a point of the plot


def parse_rates(text: str) -> list[float]:
    """`START:STOP:STEP` (inclusive) or `a,b,c` as a list of rates in [0, 1]."""
    shown = one_line(text if len(text) <= 60 else text[:59] + "…")
    try:
        if ":" in text:
            start, stop, step = (float(part) for part in text.split(":"))
            if not (step > 0 and stop >= start and all(map(math.isfinite, (start, stop, step)))):
                raise ValueError
            # Counted before the list is built: 0:1:1e-12 would be a trillion rates.
            count = math.floor((stop - start) / step + 1e-9) + 1
            if count > MAX_RATES:
                raise UsageError(f"{shown} makes {count} rates; at most {MAX_RATES}", field="--rates")
            rates = [round(start + i * step, 10) for i in range(count)]
        else:
            rates = [float(part) for part in text.split(",")]
    except (ValueError, OverflowError):
        raise UsageError(f"{shown!r} is not START:STOP:STEP or a comma list", field="--rates") from None
    if len(rates) > MAX_RATES:
        raise UsageError(f"{len(rates)} rates; at most {MAX_RATES}", field="--rates")
    if not rates or any(not 0.0 <= r <= 1.0 for r in rates):
        raise UsageError(f"rates must lie in [0, 1], got {shown!r}", field="--rates")
    return rates


def rule_from_args(args: argparse.Namespace) -> FixedRule | SprtRule | PairedRule:
    """The band rule the command line describes; a key of another rule is a usage error."""
    from pydantic import TypeAdapter, ValidationError

    from gate.core.verdicts.paired import AnyRule

    own = _RULE_ARGS[args.rule] + (_PAIR_LAW_ARGS if args.rule == "paired" else ())
    other = dict.fromkeys(name for names in (*_RULE_ARGS.values(), _PAIR_LAW_ARGS) for name in names if name not in own)
    stray = [f"--{name.replace('_', '-')}" for name in other if getattr(args, name) is not None]
    if stray:
        raise UsageError(f"{', '.join(stray)} do not apply to --rule {args.rule}")
    fields = {name: getattr(args, name) for name in _RULE_ARGS[args.rule] if getattr(args, name) is not None}
    try:
        return TypeAdapter(AnyRule).validate_python({"rule": args.rule, **fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "--" + str(first["loc"][-1]).replace("_", "-") if first["loc"][1:] else f"--rule {args.rule}"
        raise UsageError(first["msg"].removeprefix("Value error, "), field=where) from None


def run_from_args(args: argparse.Namespace) -> int:
    """Print the table for the rule on the command line, and write the plot when asked."""
    from gate.core.verdicts.bands import SprtRule
    from gate.core.verdicts.paired import PairedRule
    from gate.core.verdicts.power import operating_characteristics, power_table, smallest_fixed_n

    rule = rule_from_args(args)
    rates = parse_rates(args.rates)
    if isinstance(rule, PairedRule):
        return _run_paired(rule, rates, args)
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
            write_plot(points, f"gate power: {rule.rule} {params}", args.plot)
        except OSError as exc:
            raise UsageError(f"cannot write the plot: {exc.strerror}", file=str(args.plot), field="--plot") from None
    return RET_OK


def _run_paired(rule: PairedRule, patch_rates: list[float], args: argparse.Namespace) -> int:
    """The paired rule's table: expected pairs and outcomes at each patch rate against one base rate."""
    from gate.core.verdicts.paired_power import paired_table

    if args.base_rate is None or not 0.0 <= args.base_rate <= 1.0:
        raise UsageError("the paired rule needs the base's true hit rate in [0, 1]", field="--base-rate")
    if args.plot:
        raise UsageError("the paired rule prints its table only; --plot draws fixed and sprt", field="--plot")
    coupling = args.coupling or "independent"
    print(f"rule: {rule.model_dump_json()}")
    print(f"base rate {args.base_rate}; pairs {coupling}", end="")
    print(" (the most disagreement: the most pairs)" if coupling == "independent" else " (the fewest disagreements)")
    print(paired_table(rule, args.base_rate, patch_rates, coupling))
    return RET_OK


def write_plot(points: Sequence[OCPoint], title: str, path: Path) -> None:
    """P(pass) and P(inconclusive) above, expected and p95 trials below, against the true rate."""
    if path.suffix.lower() not in (".svg", ".png", ".pdf"):
        raise UsageError("the plot file must end in .svg, .png or .pdf", file=str(path), field="--plot")
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on a CI machine
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("plotting needs matplotlib: pip install 'probegate[plot]'", field="--plot") from None
    rates = [p.rate for p in points]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    top.plot(rates, [p.p_pass for p in points], marker="o", label="P(pass)")
    top.plot(rates, [p.p_inconclusive for p in points], marker="o", label="P(inconclusive)")
    top.set_ylabel("probability")
    top.set_ylim(0, 1)
    top.legend()
    bottom.plot(rates, [p.expected_trials for p in points], marker="o", label="E[trials]")
    bottom.plot(rates, [p.p95_trials for p in points], marker="o", label="p95 trials")
    bottom.set_xlabel("true hit rate")
    bottom.set_ylabel("trials")
    bottom.legend()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
