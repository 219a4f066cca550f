"""Where the CI reports of a card go (JUnit XML, a Markdown summary, GitHub's step summary, an HTML
page) and writing them: the rendering is `gate.core.report.junit` / `gate.core.report.markdown` /
`gate.core.report.html` (which also draws from the card's trial records)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord
from gate.core.report.html import render_html
from gate.core.report.junit import render_junit
from gate.core.report.markdown import render_markdown
from gate.io.artifacts import append_output, check_writable, write_output

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # GitHub Actions appends this file to the job's page


@dataclass(frozen=True)
class ReportTargets:
    """The report files of one command; None: not written."""

    junitxml: Path | None = None
    summary_md: Path | None = None
    step_summary: Path | None = None  # appended to, never replaced: earlier steps wrote there too
    report_html: Path | None = None

    def outputs(self) -> dict[str, Path]:
        """The files by the flag (or variable) that named them, for the checks made before anything runs."""
        named = {
            "--junitxml": self.junitxml,
            "--summary-md": self.summary_md,
            "--report-html": self.report_html,
            STEP_SUMMARY_ENV: self.step_summary,
        }
        return {field: path for field, path in named.items() if path is not None}


def check_reports(targets: ReportTargets) -> None:
    """Refuse, before any trial, a report path the gate could not write at the end."""
    for field, path in targets.outputs().items():
        check_writable(path, field)


def write_reports(card: VerdictCard, targets: ReportTargets, records: Sequence[TrialRecord] = ()) -> None:
    """Write each report the targets name; the JUnit, Markdown and HTML files atomically, the step summary
    appended. `records`, the card's trial records, feed the HTML report's SPRT paths."""
    if targets.junitxml is not None:
        write_output(targets.junitxml, render_junit(card), "JUnit XML report")
    if targets.report_html is not None:
        write_output(targets.report_html, render_html(card, records).encode("utf-8"), "HTML report")
    if targets.summary_md is not None or targets.step_summary is not None:
        markdown = render_markdown(card).encode("utf-8")
        if targets.summary_md is not None:
            write_output(targets.summary_md, markdown, "Markdown summary")
        if targets.step_summary is not None:
            append_output(targets.step_summary, b"\n" + markdown, f"step summary (${STEP_SUMMARY_ENV})")
