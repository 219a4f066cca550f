"""The short human summary printed after a run (stderr; stdout keeps the JSON lines), as a rich table.

Off a terminal it is plain text: no colour, no escape sequence. Whatever the patch's output put in a
detail (a path, a message) goes through `one_line` and is shown as text, never read as rich markup.
"""

from __future__ import annotations

from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gate.core.card.card import VerdictCard
from gate.core.escaping import one_line
from gate.core.policy.flakes import files_line, flake_note
from gate.core.policy.words import flake_line

# Off a terminal nothing is wrapped for a screen: a CI log keeps each row on as few lines as it can.
PIPED_WIDTH = 200

KIND_STYLES = {"pass": "green", "fail_safety": "bold red", "fail_contract": "red", "harness_error": "magenta"}
STATUS_STYLES = {"accepted": "bold green", "blocked": "bold red", "inconclusive": "bold yellow"}


def summary_console(file: TextIO, *, terminal: bool | None = None) -> Console:
    """A console on `file`: styled when it is a terminal (or `terminal=True`), plain text otherwise."""
    if terminal is None:
        terminal = file.isatty()
    if terminal:
        return Console(file=file, force_terminal=True, highlight=False)
    return Console(
        file=file,
        force_terminal=False,
        no_color=True,
        color_system=None,
        highlight=False,
        emoji=False,
        width=PIPED_WIDTH,
    )


def _text(value: object, style: str = "") -> Text:
    return Text(one_line(str(value)), style=style)


def print_summary(card: VerdictCard, *, file: TextIO, terminal: bool | None = None) -> None:
    """The run line, a table with one row per property, then the job status, its reasons and oracle edits."""
    console = summary_console(file, terminal=terminal)
    console.print(
        _text(
            f"probegate {card.gate_version}  run {card.run_id[:12]}  seal {card.fixture.seal[:16]}"
            f"  image {card.image_id[7:19] or '-'}  work copies {card.work_copy or '-'}"
            + (f"  interpreter warm ({card.hash_seeds} hash seeds)" if card.interpreter == "warm" else "")
        )
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("property", overflow="fold")
    table.add_column("band", overflow="fold")
    table.add_column("verdict", overflow="fold")
    table.add_column("hits", justify="right", overflow="fold")
    table.add_column("note", overflow="fold")
    for row in card.properties:
        kind = str(row.kind)
        counts = f"{row.hits}/{row.trials}" if row.trials else "-"
        if row.paired is not None and row.paired.base.trials:  # the same indices on the base tree
            counts += f" (base {row.paired.base.hit}/{row.paired.base.trials})"
        notes: list[str] = []
        if not row.voting:
            notes.append(f"(not voting: {row.frozen_by or row.ledger})")
        if row.detail and kind != "pass":
            notes.append(row.detail)
        if row.colour_change is not None:
            notes.append(flake_note(row.band, row.base_rerun))
        table.add_row(
            _text(row.id),
            _text(row.band),
            _text(kind, KIND_STYLES.get(kind, "yellow")),
            _text(counts),
            _text("  ".join(notes)),
        )
    console.print(table)
    for flake in card.pair_flakes:
        console.print(_text(flake_line(flake, card.flake_causes), "bold yellow"))
    if card.flake_files is not None:
        console.print(_text(files_line(card.flake_files), "bold yellow"))
    for lift in card.lift_proposals:
        console.print(_text(lift.line(), "bold green"))
    if card.flake_history:
        console.print(_text(f"flake history: {card.flake_history}", "dim"))
    if card.new_oracle_edits:
        console.print(_text(f"oracle files edited by the patch: {', '.join(card.new_oracle_edits)}", "bold red"))
    status = str(card.status)
    console.print(Text.assemble("job: ", _text(status, STATUS_STYLES.get(status, "")), f" (exit {card.exit_code})"))
    for reason in card.reasons:
        console.print(Text.assemble("  - ", _text(reason)))
