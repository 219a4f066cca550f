"""Running the gate the way a user does: the patch as a commit over a base, `python -m gate.cli run --base`,
then `python -P -m gate.cli accept --base` (-P: the working directory never lands on the import path), each a
process of its own forked from the tests' zygote (tests/support/zygote.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from filelock import FileLock
from support.example_repo import Repo, example_repo
from support.paths import INVOICE as EXAMPLE
from support.zygote import gate_command

# For runs over a broker whose test is not about enrolment: the workers are the test's own, on loopback.
UNENROLLED = "--allow-unenrolled-workers"
# Seeds under which the noisy sampler's random tie-break lands 6 hits in 10 (and its SPRT run is called
# below the band after 20 trials). With fresh seeds it lands 8 or more, and passes, 1 run in 18: a test
# that needs it refused replays these, since a test must not fail by luck (accept refuses a replay too).
NOISY_SEEDS = ("--replay-seeds", "noisy-1")


def seeds_for(patch: str) -> tuple[str, ...]:
    """The flags pinning an example patch's trial seeds: only the noisy sampler's draws depend on them."""
    return NOISY_SEEDS if patch == "noisy_sampler" else ()


class Run:
    """One finished `gate run` plus `gate accept` on its card."""

    def __init__(
        self, card_path: Path, done: subprocess.CompletedProcess[str], accept: int, accept_said: str = ""
    ) -> None:
        self.card_path = card_path
        self.code = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr
        self.accept = accept
        self.accept_said = accept_said
        # `gate accept`'s JSON line: {"accepted": …, "reasons": […], …}
        self.accepted = json.loads(accept_said.splitlines()[-1]) if accept_said.strip() else None
        self.card = json.loads(card_path.read_text())
        self.lines = [json.loads(ln) for ln in done.stdout.splitlines()]

    def kinds(self) -> dict[str, str]:
        return {row["id"]: row["kind"] for row in self.card["properties"]}

    def save(self, path: Path) -> None:
        """Write what `load` needs to give this run back (the card stays where it is)."""
        said = {"card": str(self.card_path), "code": self.code, "stdout": self.stdout, "stderr": self.stderr}
        path.write_text(json.dumps({**said, "accept": self.accept, "accept_said": self.accept_said}))

    @classmethod
    def load(cls, path: Path) -> Run:
        """The run `save` wrote to `path`."""
        said = json.loads(path.read_text())
        done = subprocess.CompletedProcess([], said["code"], said["stdout"], said["stderr"])
        return cls(Path(said["card"]), done, said["accept"], said["accept_said"])


def gate_run(
    example: Path,
    patch: str,
    card: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    new_ledger: bool = False,
    suite: str = "gate.toml",
    accept_extra: tuple[str, ...] = (),
) -> Run:
    """Run the gate like examples/invoice/run.sh does: the patch as a commit over the example's base in
    a fresh repository beside the card, `gate run --base`, then `gate accept --base`, told UNENROLLED when
    the run was (as a CI job that chose it would tell both). `new_ledger`: the first run on its ledger
    (default `ledger.json` beside the card), which must not exist yet. `suite`: the example's suite file to
    run (`paired.toml`: the paired suite, whose patches are `paired/NAME`). `accept_extra`: more flags for
    `gate accept` (e.g. `--allow-replayed-seeds` after `--replay-seeds`)."""
    card.parent.mkdir(parents=True, exist_ok=True)
    name = patch.replace("/", "-")
    repo = example_repo(card.parent / f"repo-{name}-{uuid.uuid4().hex[:8]}", patch, source=example)
    oracle = (
        "--suite",
        str(repo.root / suite),
        "--workdir",
        str(repo.app),
        "--seal",
        str(repo.seal),
        "--base",
        repo.base,
    )
    args = [*oracle, "--retries", "0", "--card", str(card), *(("--new-ledger",) if new_ledger else ()), *extra]
    done = gate_command("gate.cli", sys.executable, ["run", *args], env=env, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    told = tuple(a for a in extra if a == UNENROLLED)
    said = ["--card", str(card), *oracle, *told, *accept_extra]
    accepted = gate_command("gate.cli", sys.executable, ["accept", *said], safe_path=True, timeout=60)
    return Run(card, done, accepted.returncode, accepted.stdout)


GATE = Path(sys.executable).with_name("gate")  # the console script, installed outside the checkout


def oracle_args(repo: Repo) -> tuple[str, ...]:
    """Where a repository's oracle is named: the suite, the patched tree, the seal and the base."""
    return ("--suite", str(repo.suite), "--workdir", str(repo.app), "--seal", str(repo.seal), "--base", repo.base)


def script_run(repo: Repo, card: Path, *extra: str, cwd: Path | None = None) -> tuple[int, dict, str]:
    """`gate run --base` (the console script) on a repository's patched tree; (exit, card or {}, stderr)."""
    args = ["--log-level", "warning", "run", *oracle_args(repo), "--card", str(card), *extra]
    if cwd is None:  # from the zygote; a run from another folder (what its import path holds) starts for real
        done = gate_command(None, str(GATE), args, timeout=300)
    else:
        done = subprocess.run([str(GATE), *args], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(card.read_text()) if card.exists() else {}, done.stderr


def script_accept(
    repo: Repo, card: Path, *, cwd: Path | None = None, command: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`gate accept --base` on a repository's patched tree (`command`: another way to start the gate)."""
    args = ["accept", "--card", str(card), *oracle_args(repo)]
    if cwd is None and not command:  # as script_run
        done = gate_command(None, str(GATE), args, timeout=120)
    else:
        done = subprocess.run([*(command or (str(GATE),)), *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


FORCED = {"PROBEGATE_WORK_COPY": "copy", "PROBEGATE_INTERPRETER": "warm"}  # the `copy+warm` modes


class ExampleRuns:
    """The invoice example's patches, each run once per pytest session in each work copy mode and shared by
    every xdist worker through `root`: the first test to ask runs it (holding its lock), the others read it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def get(self, patch: str, mode: str = "default") -> Run:
        """`patch` run in the default modes (`default`: overlay work copies, fresh interpreters) or with copied
        work dirs and warm interpreters forced (`copy+warm`); the noisy sampler on its pinned seeds
        (`seeds_for`)."""
        where = self.root / mode / patch
        where.mkdir(parents=True, exist_ok=True)
        with FileLock(where / "run.lock", timeout=600):
            if (where / "run.json").exists():
                return Run.load(where / "run.json")
            env = {k: v for k, v in os.environ.items() if k not in FORCED}
            if mode == "copy+warm":
                env.update(FORCED)
            run = gate_run(EXAMPLE, patch, where / "verdict-card.json", *seeds_for(patch), env=env, new_ledger=True)
            run.save(where / "run.json")
            return run

    def all(self, mode: str = "default") -> dict[str, Run]:
        """Every patch of the example, by name."""
        return {name: self.get(name, mode) for name in PATCHES}


PATCHES = sorted(p.name for p in (EXAMPLE / "patches").iterdir())
