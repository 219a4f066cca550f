"""The `gate` command's arguments: every subcommand and its flags, and the argparse types that
refuse what a flag cannot mean (NaN, negative waits) before anything runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate import __version__
from gate.cli.argtypes import finite, run_id, share
from gate.cli.books import add_ledger_arguments, add_new_ledger_argument
from gate.cli.diff import add_diff_parser
from gate.cli.doctor import add_doctor_parser
from gate.cli.evidence import add_evidence_parser
from gate.cli.flakes import add_flakes_parser
from gate.cli.images import add_image_arguments
from gate.cli.init import add_init_parser
from gate.cli.pool import add_pool_parser
from gate.cli.power import add_power_parser
from gate.cli.refold import add_refold_parser
from gate.cli.report import add_report_flags, add_report_parser
from gate.cli.runargs import add_placement_arguments, add_tree_arguments
from gate.cli.schema import add_schema_parser
from gate.cli.seal import add_seal_parsers
from gate.cli.settings import ACCEPT_KEY_ENV
from gate.cli.setup import add_setup_parser
from gate.cli.signing import add_sign_key_argument, add_signing_parsers
from gate.cli.sweep import add_sweep_parser
from gate.cli.view import add_view_parser
from gate.cli.workers import add_workers_parser
from gate.io.cliargs import ArgParser


def build_parser() -> argparse.ArgumentParser:
    """The `gate` parser: every subcommand, each with its handler."""
    parser = ArgParser(prog="gate", description="Seal fixtures, run probes in sandboxes, stamp a verdict card.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgParser)
    # Each subcommand names its handler (`module:function`, set_defaults): gate.cli.main imports that module
    # only when the command runs. Most are added by their own module; run, baseline and accept share groups.
    add_setup_parser(sub)
    add_doctor_parser(sub)
    add_init_parser(sub)

    add_seal_parsers(sub)
    add_power_parser(sub)

    run = sub.add_parser("run", help="run the suite once against a patched tree and write the card")
    run.set_defaults(handler="gate.cli.runcommands:run_command")
    add_run_arguments(run, card_help="where to write the verdict card (default: the suite's `card`)")
    run.add_argument("--calibration", type=Path, help="baseline calibration (default: the suite's `calibration`)")
    add_new_ledger_argument(run)
    add_select_arguments(run)
    add_sign_key_argument(run)
    run.add_argument(
        "--replay-seeds",
        type=run_id,
        metavar="RUN_ID",
        help="give every trial the seed it had in run RUN_ID (a card's run_id), to replay its trials exactly; "
        "recorded on the card, which `gate accept` then refuses unless given --allow-replayed-seeds",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted run that wrote this card, from its journal in the state folder"
        " ($PROBEGATE_STATE_DIR, default ~/.local/state/probegate): its stored trials are reused, the rest"
        " run; a journal of another run, tree, image, suite or seal is refused (65); without one every trial runs",
    )

    base = sub.add_parser("baseline", help="run the suite on the unpatched tree and write the calibration")
    base.set_defaults(handler="gate.cli.runcommands:baseline_command")
    add_run_arguments(base, card_help="the baseline's card (default: baseline-card.json by --calibration)")
    base.add_argument("--calibration", type=Path, required=True, help="calibration file to write")
    base.add_argument("--factor", type=finite, default=1.5, help="proposed deadline = p95 x factor (default 1.5)")
    base.add_argument(
        "--twice",
        action="store_true",
        help="the nightly pair: run twice in a row, keep both in the books' flake history (--ledger), propose"
        " freezes for properties that changed colour and lifts for freezes that passed long enough",
    )
    base.add_argument(
        "--lift-target",
        type=finite,
        default=0.05,
        help="with --twice: failure rate a freeze's passes must bound (95%%) before lifting (default 0.05: 60 runs)",
    )
    add_new_ledger_argument(base)

    add_report_parser(sub)
    add_flakes_parser(sub)

    acc = sub.add_parser("accept", help="exit 0 only when the card allows the merge")
    acc.set_defaults(handler="gate.cli.accept:accept_command")
    add_accept_arguments(acc)
    add_diff_parser(sub)
    add_refold_parser(sub)
    add_evidence_parser(sub)
    add_signing_parsers(sub)

    add_sweep_parser(sub)
    add_image_arguments(sub)
    add_workers_parser(sub)
    add_pool_parser(sub)
    add_view_parser(sub)

    add_schema_parser(sub)
    return parser


def add_run_arguments(run: argparse.ArgumentParser, *, card_help: str) -> None:
    add_tree_arguments(run)
    run.add_argument("--retries", type=int, default=0, help="recorded on the card; anything but 0 fails accept")
    run.add_argument("--card", type=Path, help=card_help)
    run.add_argument(
        "--base",
        metavar="GIT_REV",
        help="read the oracle from this revision, find oracle edits; paired properties run its tree too",
    )
    add_report_flags(run)
    add_ledger_arguments(run)
    run.add_argument(
        "--cross-check",
        type=share,
        metavar="SHARE",
        help="with --broker: share of safety/contract trials run again on a second worker, 0..1 "
        "(default: the suite's `cross_check`, 0.05); at least one per property when above 0",
    )
    add_placement_arguments(run)


def add_select_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--property", action="append", default=[], metavar="ID", help="run only this property (repeatable)"
    )
    run.add_argument("-k", dest="keyword", metavar="EXPR", help="run only ids holding EXPR (or matching it as a glob)")


def add_accept_arguments(acc: argparse.ArgumentParser) -> None:
    acc.add_argument("--card", type=Path, help="the verdict card (default: the suite's `card`)")
    acc.add_argument("--seal", type=Path, help="seal file of the fixture tree (default: the suite's `seal`)")
    acc.add_argument("--workdir", type=Path, default=Path("."), help="the tree being merged (default .)")
    acc.add_argument("--suite", type=Path, default=Path("gate.toml"), help="suite file (default ./gate.toml)")
    acc.add_argument(
        "--base", metavar="GIT_REV", help="read the oracle from this revision and recompute the oracle edits"
    )
    acc.add_argument(
        "--allow-unchecked-oracle",
        action="store_true",
        help="accept a card from a run without --base, whose oracle edits nobody checked",
    )
    acc.add_argument(
        "--allow-unenrolled-workers",
        action="store_true",
        help="accept a card from a run with --allow-unenrolled-workers, whose results no worker registry checked",
    )
    acc.add_argument(
        "--allow-replayed-seeds",
        action="store_true",
        help="accept a card from a run with --replay-seeds, whose trials drew seeds chosen for them",
    )
    acc.add_argument(
        "--key",
        type=Path,
        metavar="PUBLIC_KEY",
        help=f"require the card's signature (CARD.dsse.json) by this public key (default ${ACCEPT_KEY_ENV}, "
        "else the suite's `public_key`; with none of the three, no signature is required)",
    )
