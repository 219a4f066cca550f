"""Running the gate the way a user does: `python -m gate.run`, then `python -P -m gate.accept` (-P:
the working directory never lands on the coordinator's import path)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice"


class Run:
    """One finished `gate run` plus `gate accept` on its card."""

    def __init__(self, card_path: Path, done: subprocess.CompletedProcess[str], accept: int) -> None:
        self.code = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr
        self.accept = accept
        self.card = json.loads(card_path.read_text())
        self.lines = [json.loads(ln) for ln in done.stdout.splitlines()]

    def kinds(self) -> dict[str, str]:
        return {row["id"]: row["kind"] for row in self.card["properties"]}


def gate_run(
    example: Path,
    patch: str,
    card: Path,
    *extra: str,
    fixture: Path | None = None,
    env: dict[str, str] | None = None,
    new_ledger: bool = False,
) -> Run:
    """Run the gate like examples/invoice/run.sh does, then accept the card. `new_ledger`: the first
    run on its ledger (default `ledger.json` beside the card), which must not exist yet."""
    patch_dir = example / "patches" / patch
    fixture = fixture or (patch_dir / "fixtures" if (patch_dir / "fixtures").is_dir() else example / "fixtures")
    seal = example / ".fixture-seal"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gate.run",
            "--suite",
            str(example / "gate.toml"),
            "--workdir",
            str(patch_dir),
            "--fixture",
            str(fixture),
            "--seal",
            str(seal),
            "--retries",
            "0",
            "--card",
            str(card),
            *(("--new-ledger",) if new_ledger else ()),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert "Traceback" not in done.stderr, done.stderr
    accepted = subprocess.run(
        [
            *(sys.executable, "-P", "-m", "gate.accept", "--card", str(card), "--seal", str(seal)),
            *("--workdir", str(patch_dir), "--suite", str(example / "gate.toml")),
            *(() if "--base" in extra else ("--allow-unchecked-oracle",)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Run(card, done, accepted.returncode)
