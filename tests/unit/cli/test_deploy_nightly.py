"""The nightly pair's deploy files (deploy/probegate-nightly.service, .timer, nightly.cron): one schedule,
one `gate baseline --twice` command line that the gate's own parser accepts, outputs outside the checkout."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from support.paths import ROOT

from gate.cli.arguments import build_parser

DEPLOY = ROOT / "deploy"
GATE = "/opt/probegate/.venv/bin/gate"


def service_command() -> list[str]:
    (line,) = [
        ln for ln in (DEPLOY / "probegate-nightly.service").read_text().splitlines() if ln.startswith("ExecStart=")
    ]
    return shlex.split(line.removeprefix("ExecStart="))


def cron_command() -> tuple[list[str], list[str]]:
    (line,) = [ln for ln in (DEPLOY / "nightly.cron").read_text().splitlines() if ln and ln[0].isdigit()]
    found = re.search(re.escape(GATE) + r"[^;]*", line)
    assert found is not None
    return line.split()[:5], shlex.split(found.group(0))


def test_the_timer_and_the_cron_line_share_one_schedule() -> None:
    """The timer fires at the cron line's minute and hour, after the 03:17 seal check."""
    schedule, _ = cron_command()
    minute, hour = int(schedule[0]), int(schedule[1])
    assert schedule[2:] == ["*", "*", "*"] and (hour, minute) > (3, 17)
    timer = (DEPLOY / "probegate-nightly.timer").read_text().splitlines()
    assert f"OnCalendar=*-*-* {hour:02d}:{minute:02d}:00" in timer and "Unit=probegate-nightly.service" in timer


def test_both_run_the_same_pair_and_the_parser_accepts_it() -> None:
    """Service and cron run one command line, `gate baseline --twice --base HEAD`, which parses, and whose
    card, calibration and ledger lie outside the checkout the pair judges (cleaned before each run)."""
    command = service_command()
    assert cron_command()[1] == command and command[0] == GATE
    args = build_parser().parse_args(command[1:])
    assert (args.command, args.twice, args.base) == ("baseline", True, "HEAD")
    for path in (args.card, args.calibration, Path(args.ledger), args.summary_md):
        assert path.is_absolute() and not path.is_relative_to("/srv/probegate/repo"), path
