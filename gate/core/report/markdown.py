"""The verdict card as a Markdown summary (a CI job page, GitHub's step summary): the gate's
verdict line, one table row per property, the reasons and the digests the run was bound to.

Pure: card in, text out. Details and reasons quote the patch's output, so each is rendered as
inert text: it can neither leave its table cell or list item, nor start a heading, a link, code,
HTML or an escape sequence, nor pass for the gate's own verdict line.
"""

from __future__ import annotations

import re

from gate.core.card.card import PropertyRow, VerdictCard
from gate.core.escaping import escaped
from gate.core.policy.flakes import files_line, flake_note
from gate.core.policy.policy import JobStatus
from gate.core.policy.words import flake_line
from gate.core.trust.crosscheck_summary import report_lines

_CELL_CHARS = 300  # the card keeps the whole detail; the page needs a readable row

# ASCII characters that give Markdown or HTML a meaning inside a line (cell borders, code, emphasis,
# links, raw HTML, entities, headings, strikethrough, GitHub's $math$), written as numeric entities:
# they render as themselves, but a GFM table splits cells on the raw "|" only, and inline parsing
# never sees an entity as syntax.
_ACTIVE = frozenset("|`\\<>&*_[]~#$")
_NAMED = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}

_MARK = {
    JobStatus.ACCEPTED: "✅",
    JobStatus.INCONCLUSIVE: "⚠️",
    JobStatus.BLOCKED: "❌",
    JobStatus.HARNESS_BROKEN: "🛠️",
    JobStatus.SAMPLER_BUDGET_EXCEEDED: "🎲",
}


_IDENT = re.compile(r"[A-Za-z0-9_.:\-]+")


def md_code(text: str) -> str:
    """`text` as a code span when it is a plain identifier (ids, digests, run ids), else as inert text."""
    return f"`{text}`" if _IDENT.fullmatch(text) else md_inline(text)


def md_inline(text: str, limit: int | None = None) -> str:
    """`text` as one line of inert Markdown: active punctuation as entities, and every character that
    is not printable (newlines, NUL, ESC of an ANSI sequence, bidi marks, lone surrogates) as a
    visible \\n / \\xNN / \\uNNNN escape, so nothing a probe prints can add a line or drive a terminal."""
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    out: list[str] = []
    for char in text:
        if char in _ACTIVE:
            out.append(_NAMED.get(char, f"&#{ord(char)};"))
        else:
            out.append(char if char.isprintable() else escaped(char))
    return "".join(out)


def verdict_line(card: VerdictCard) -> str:
    """The first line: a level-2 heading, which no table cell or list item can produce."""
    return f"## {_MARK[card.status]} probegate: job {md_inline(str(card.status))} (exit {card.exit_code})"


def _kind_cell(row: PropertyRow) -> str:
    if row.voting:
        return md_inline(str(row.kind))
    why = row.frozen_by or (str(row.ledger) if row.ledger else "no vote")
    return f"{md_inline(str(row.kind))} (not voting: {md_inline(why)})"


def _row(row: PropertyRow) -> str:
    cells = [
        md_inline(row.id),
        md_inline(str(row.band)),
        _kind_cell(row),
        str(row.trials),
        str(row.hits) + _base_hits(row),
        md_inline(row.detail, _CELL_CHARS),
    ]
    return "| " + " | ".join(cells) + " |"


def _base_hits(row: PropertyRow) -> str:
    """A paired row's base-tree hits of the same indices, marked as the base's; nothing for other rows."""
    base = row.paired.base if row.paired is not None else None
    return f" (base {base.hit}/{base.trials})" if base is not None and base.trials else ""


def render_markdown(card: VerdictCard) -> str:
    """The summary as Markdown text ending in a newline; the verdict line comes first."""
    lines = [
        verdict_line(card),
        "",
        f"Suite {md_inline(card.suite)}, run {md_inline(card.run_id[:12])}.",
        "",
        "| property | band | kind | trials | hits | detail |",
        "|---|---|---|---:|---:|---|",
        *(_row(row) for row in card.properties),
        "",
    ]
    if card.reasons:
        lines += ["**Reasons**", "", *(f"- {md_inline(reason)}" for reason in card.reasons), ""]
    changed = [row for row in card.properties if row.colour_change is not None]
    if changed:
        # A colour change is reported, never excused: what its base rerun showed, and what was proposed.
        lines += ["**Colour changes**", ""]
        lines += [f"- {md_inline(row.id)}: {md_inline(flake_note(row.band, row.base_rerun))}" for row in changed]
        if card.flake_files is not None:
            lines.append(f"- {md_inline(files_line(card.flake_files))}")
        lines.append("")
    elif card.pair_flakes:  # the nightly pair's flakes: colour changes between its two runs
        lines += ["**Colour changes between the nightly runs**", ""]
        lines += [f"- {md_inline(flake_line(flake, card.flake_causes))}" for flake in card.pair_flakes]
        if card.flake_files is not None:
            lines.append(f"- {md_inline(files_line(card.flake_files))}")
        lines.append("")
    elif card.flake_files is not None:
        lines += [f"**Flakes** {md_inline(files_line(card.flake_files))}", ""]
    if card.lift_proposals:
        lifts = [f"- {md_inline(lift.line())}" for lift in card.lift_proposals]
        lines += ["**Freezes due to be lifted**", "", *lifts, ""]
    if card.flake_history:  # whether this run counts towards lifting its freezes (only on the base's tree)
        lines += [f"Flake history: {md_inline(card.flake_history)}", ""]
    if workers := report_lines(card.cross_check, (row.workers for row in card.properties)):
        lines += ["**Workers and cross-checks**", "", *(f"- {md_inline(line, _CELL_CHARS)}" for line in workers), ""]
    if card.new_oracle_edits:
        lines += [f"Oracle files edited by the patch: {md_inline(', '.join(card.new_oracle_edits))}", ""]
    image = card.image_id.removeprefix("sha256:")[:12] or "-"
    seal = card.fixture.seal[:16]
    lines.append(f"Image {md_inline(image)}, seal {md_inline(seal)}, gate {md_inline(card.gate_version)}.")
    return "\n".join(lines) + "\n"
