"""`gate flakes explain PROPERTY…`: name the source of nondeterminism that moves each flaky property,
by rerunning it on the base in controlled variants (gate.run.explain, gate.core.policy.explain)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gate.cli.runargs import add_placement_arguments, add_tree_arguments
from gate.core.errors import RET_BLOCKED, RET_OK, UsageError
from gate.core.escaping import one_line

if TYPE_CHECKING:
    from gate.cli.executors import Placement
    from gate.core.policy.explain import Explanation

_EPILOG = (
    "Each property is rerun on the base (--base REV, or the work tree with --allow-unchecked-oracle) with "
    "every source of nondeterminism varying, then all held fixed, then halves of them fixed, until one "
    "source (or two) holds it steady when fixed and moves it when only it varies. Prints one JSON line per "
    "property on stdout: {property_id, finding, source, steady_with, flickers_with, trials, bound, tried, words}, "
    "and the words on stderr. "
    "Exit 0: every property explained, named the residual, or steady; 1: one could not be explained within "
    "the budget; 64/65/66 as for `gate run`."
)


def add_flakes_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `flakes explain` to the `gate` command's subparsers."""
    flakes = subparsers.add_parser("flakes", help="explain flaky properties")
    flakes.set_defaults(handler="gate.cli.runcommands:flakes_command")
    sub = flakes.add_subparsers(dest="flakes_command", metavar="explain", required=True, parser_class=type(flakes))
    explain = sub.add_parser(
        "explain", help="find which source of nondeterminism moves a flaky property", epilog=_EPILOG
    )
    explain.add_argument("property", nargs="+", metavar="PROPERTY", help="a safety or contract property id")
    add_tree_arguments(explain)
    explain.add_argument("--base", metavar="GIT_REV", help="the base revision to explain the flake on")
    explain.add_argument(
        "--allow-unchecked-oracle",
        action="store_true",
        help="without --base: take the work tree as the base, with the oracle its files hold",
    )
    explain.add_argument(
        "--trials",
        type=int,
        default=None,
        metavar="N",
        help="observed trials of one colour that make a variant steady (default 30: bounds a flicker rate at 9.5%%)",
    )
    explain.add_argument("--budget", type=int, default=None, metavar="N", help="trials per property (default 200)")
    explain.add_argument("--out", type=Path, metavar="FILE", help="also write the explanations to FILE as JSON")
    add_placement_arguments(explain)
    return explain


def run_flakes(args: argparse.Namespace, *, placement: Placement, interpreter: Literal["fresh", "warm"] | None) -> int:
    """Explain each property named; print one line each; 0 unless one is left unexplained."""
    from gate.cli.executors import executor_factory
    from gate.cli.images import build_for_run
    from gate.core.policy.explain import BUDGET, STEADY_N, Finding
    from gate.io.artifacts import check_writable, write_atomic
    from gate.run.explain import ExplainRequest, explain_flakes

    steady_n = STEADY_N if args.trials is None else args.trials
    budget = BUDGET if args.budget is None else args.budget
    if steady_n < 1:
        raise UsageError("must be at least 1", field="--trials")
    if budget < steady_n:
        raise UsageError(f"must be at least --trials ({steady_n})", field="--budget")
    if args.out is not None:
        check_writable(args.out, "--out")
    request = ExplainRequest(
        suite=args.suite,
        workdir=args.workdir,
        properties=tuple(args.property),
        fixture=args.fixture,
        seal=args.seal,
        base=args.base,
        allow_unchecked_oracle=args.allow_unchecked_oracle,
        image=args.image,
        interpreter=interpreter,
        steady_n=steady_n,
        budget=budget,
    )
    explanations = explain_flakes(request, executor_factory=executor_factory(placement), image_factory=build_for_run)
    for explanation in explanations:
        print(json.dumps(explanation.model_dump(mode="json")), file=sys.stdout)
    for e in explanations:  # the same, in words, for whoever watches the terminal
        print(one_line(f"{e.property_id}: {e.source or e.finding} ({e.trials} trials): {e.words}"), file=sys.stderr)
    if args.out is not None:
        write_atomic(args.out, (_document(explanations) + "\n").encode("utf-8"))
    unexplained = any(e.finding is Finding.UNEXPLAINED for e in explanations)
    return RET_BLOCKED if unexplained else RET_OK


def _document(explanations: list[Explanation]) -> str:
    return json.dumps({"explanations": [e.model_dump(mode="json") for e in explanations]}, indent=2)
