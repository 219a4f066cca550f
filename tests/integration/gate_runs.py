"""Running the gate the way a user does: the patch as a commit over a base, `python -m gate.run --base`,
then `python -P -m gate.accept --base` (-P: the working directory never lands on the import path)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from example_repo import Repo, example_repo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invoice"


class Run:
    """One finished `gate run` plus `gate accept` on its card."""

    def __init__(
        self, card_path: Path, done: subprocess.CompletedProcess[str], accept: int, accept_said: str = ""
    ) -> None:
        self.code = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr
        self.accept = accept
        # `gate accept`'s JSON line: {"accepted": …, "reasons": […], …}
        self.accepted = json.loads(accept_said.splitlines()[-1]) if accept_said.strip() else None
        self.card = json.loads(card_path.read_text())
        self.lines = [json.loads(ln) for ln in done.stdout.splitlines()]

    def kinds(self) -> dict[str, str]:
        return {row["id"]: row["kind"] for row in self.card["properties"]}


def gate_run(
    example: Path,
    patch: str,
    card: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    new_ledger: bool = False,
) -> Run:
    """Run the gate like examples/invoice/run.sh does: the patch as a commit over the example's base in
    a fresh repository beside the card, `gate run --base`, then `gate accept --base`. `new_ledger`: the
    first run on its ledger (default `ledger.json` beside the card), which must not exist yet."""
    card.parent.mkdir(parents=True, exist_ok=True)
    repo = example_repo(card.parent / f"repo-{patch}-{uuid.uuid4().hex[:8]}", patch, source=example)
    oracle = ("--suite", str(repo.suite), "--workdir", str(repo.app), "--seal", str(repo.seal), "--base", repo.base)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "gate.run", *oracle, "--retries", "0", "--card", str(card)),
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
        [sys.executable, "-P", "-m", "gate.accept", "--card", str(card), *oracle],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Run(card, done, accepted.returncode, accepted.stdout)


GATE = Path(sys.executable).with_name("gate")  # the console script, installed outside the checkout


def oracle_args(repo: Repo) -> tuple[str, ...]:
    """Where a repository's oracle is named: the suite, the patched tree, the seal and the base."""
    return ("--suite", str(repo.suite), "--workdir", str(repo.app), "--seal", str(repo.seal), "--base", repo.base)


def script_run(repo: Repo, card: Path, *extra: str, cwd: Path | None = None) -> tuple[int, dict, str]:
    """`gate run --base` (the console script) on a repository's patched tree; (exit, card or {}, stderr)."""
    cmd = [str(GATE), "--log-level", "warning", "run", *oracle_args(repo), "--card", str(card), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(card.read_text()) if card.exists() else {}, done.stderr


def script_accept(
    repo: Repo, card: Path, *, cwd: Path | None = None, command: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`gate accept --base` on a repository's patched tree (`command`: another way to start the gate)."""
    cmd = [*(command or (str(GATE),)), "accept", "--card", str(card), *oracle_args(repo)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done
