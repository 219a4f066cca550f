"""The short human summary printed after a run (stderr; stdout keeps the JSON lines)."""

from __future__ import annotations

from typing import TextIO

from gate.core.card import VerdictCard


def print_summary(card: VerdictCard, *, file: TextIO) -> None:
    """A few aligned lines: one per property, then the job status and where the card is."""
    width = max((len(r.id) for r in card.properties), default=8)
    print(
        f"probegate {card.gate_version}  run {card.run_id[:12]}  seal {card.fixture.seal[:16]}"
        f"  image {card.image_id[7:19] or '-'}",
        file=file,
    )
    for row in card.properties:
        counts = f"{row.hits}/{row.trials}" if row.trials else "-"
        vote = "" if row.voting else f"  (not voting: {row.frozen_by or row.ledger})"
        detail = f"  {row.detail}" if row.detail and row.kind != "pass" else ""
        print(f"  {row.id:<{width}}  {row.band:<11}  {row.kind:<20}  {counts:>7}{vote}{detail}", file=file)
    if card.new_oracle_edits:
        print(f"  oracle files edited by the patch: {', '.join(card.new_oracle_edits)}", file=file)
    print(f"job: {card.status} (exit {card.exit_code})", file=file)
    for reason in card.reasons:
        print(f"  - {reason}", file=file)
