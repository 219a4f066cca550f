"""`gate workers status`: the fleet as it is now. Each enrolled worker: up or gone and when last seen (its
heartbeat on the broker), its batches in flight and trials taken in the last minute (its own word), the
disputes naming it and whether it was caught (on the card given), and the invites still open.

    gate workers status [--json] [--card CARD]
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate.core.errors import RET_OK

COLUMNS = ("name", "tier", "state", "last seen", "in flight", "trials/min", "disputes", "caught")


def add_status_action(actions: Any, registry: Any, admin: Any) -> None:
    """The `status` action under `gate workers`."""
    status = actions.add_parser("status", help="each enrolled worker: up or gone, last seen, load, disputes")
    status.add_argument("--json", action="store_true", help="one JSON object per worker, then one for the invites")
    status.add_argument("--card", type=Path, help="a verdict card whose disputes and caught workers to show")
    registry(status)
    admin(status)


def run_status(args: argparse.Namespace, admin: str) -> int:
    """Print the fleet's status (see the module docstring)."""
    from gate.cli.settings import registry_of
    from gate.core.trust.fleet import fleet, invites_open
    from gate.io.invites import invites_path, load_invites
    from gate.io.workers import load_roster
    from worker.celery.coordinator.liveness import read_beats

    registry = registry_of(args)
    roster = load_roster(registry, missing_ok=True)
    summary, read_card = None, args.card is not None
    if args.card is not None:
        from gate.io.artifacts import read_card

        summary = read_card(args.card).cross_check
    now = datetime.now(UTC)
    beats = read_beats(admin, [w.key_id for w in roster.workers if w.active])
    rows = fleet(roster, beats, summary, read_card=read_card)
    invites = invites_open(load_invites(invites_path(registry)), now)
    if args.json:
        for row in rows:
            print(row.model_dump_json())
        print(json.dumps({"invites": invites.model_dump()}))
        return RET_OK
    table = [COLUMNS, *([_cells(row, now) for row in rows])]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    print(f"invites: {invites.open} open, {invites.uses_left} join(s) left")
    return RET_OK


def _cells(row: Any, now: datetime) -> tuple[str, ...]:
    def shown(value: object) -> str:
        return "-" if value is None else str(value)

    seen = "never" if row.last_seen is None else f"{max(0, int((now - row.last_seen).total_seconds()))}s ago"
    caught = "-" if row.caught is None else ("yes" if row.caught else "no")
    return (
        row.name,
        row.tier,
        row.state,
        seen,
        shown(row.in_flight),
        shown(row.trials_last_minute),
        shown(row.disputes),
        caught,
    )
