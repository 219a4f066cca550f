"""The command line as the tests drive it: a `gate run` of the invoice example, and the one-line refusal."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run_args(ex: Path, *extra: str) -> list[str]:
    """`gate run` arguments for the example at `ex`, its good patch, card under `out/`."""
    return [
        "run",
        "--suite",
        str(ex / "gate.toml"),
        "--workdir",
        str(ex / "patches" / "good"),
        "--seal",
        str(ex / ".fixture-seal"),
        "--card",
        str(ex / "out" / "card.json"),
        *extra,
    ]


def assert_one_line(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """Exit `code` with exactly one `gate: error:` line on stderr holding every needle, and no traceback."""
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("gate: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
