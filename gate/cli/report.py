"""`gate report CARD`: the CI reports (JUnit XML, Markdown summary, HTML page) of a card written
earlier, the same bytes `gate run --junitxml/--summary-md/--report-html` writes right after the card
(the HTML page's SPRT paths drawn from the card's verified trial records, when its store is beside it)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gate.cli.settings import settings_of
from gate.core.errors import RET_OK, UsageError

if TYPE_CHECKING:
    from gate.io.reports import ReportTargets


def add_report_flags(parser: argparse.ArgumentParser) -> None:
    """--junitxml, --summary-md and --report-html, shared by `run`, `baseline` and `report`."""
    parser.add_argument("--junitxml", type=Path, metavar="FILE", help="also write the card as JUnit XML")
    parser.add_argument(
        "--summary-md",
        type=Path,
        metavar="FILE",
        # $GITHUB_STEP_SUMMARY is gate.io.reports.STEP_SUMMARY_ENV, written out so that parsing does not
        # load the card models (a unit test keeps them equal).
        help="also write a Markdown summary (and append it to $GITHUB_STEP_SUMMARY when that is set)",
    )
    parser.add_argument(
        "--report-html",
        type=Path,
        metavar="FILE",
        help="also write a single-file HTML report with SVG plots (no script, strict CSP)",
    )


def add_report_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `report` to the `gate` command's subparsers."""
    parser = subparsers.add_parser(
        "report", help="write JUnit XML / a Markdown summary / an HTML report from a verdict card"
    )
    parser.set_defaults(handler="gate.cli.report:run_report")
    parser.add_argument("card", type=Path, metavar="CARD", help="the verdict card to report")
    add_report_flags(parser)
    return parser


def report_targets(args: argparse.Namespace) -> ReportTargets:
    """The report files the command line and the environment name."""
    from gate.io.reports import ReportTargets

    step = settings_of(args).step_summary
    return ReportTargets(args.junitxml, args.summary_md, step_summary=step, report_html=args.report_html)


def run_report(args: argparse.Namespace) -> int:
    """Read the card, write the reports it names; exit 0 (the card's own exit code is `gate run`'s)."""
    from gate.io.artifacts import read_card
    from gate.io.evidence import stored_records
    from gate.io.reports import STEP_SUMMARY_ENV, check_reports, write_reports

    targets = report_targets(args)
    if not targets.outputs():
        raise UsageError(
            f"nothing to write: pass --junitxml, --summary-md or --report-html (or set ${STEP_SUMMARY_ENV})"
        )
    card_key = os.path.abspath(args.card)
    for field, path in targets.outputs().items():
        if os.path.abspath(path) == card_key:
            raise UsageError("names the same file as CARD", file=str(path), field=field)
    check_reports(targets)
    card = read_card(args.card)
    # Only the page draws from the records: JUnit and Markdown alone neither read nor check the store.
    records = stored_records(card, args.card) if targets.report_html is not None else []
    write_reports(card, targets, records)
    return RET_OK
