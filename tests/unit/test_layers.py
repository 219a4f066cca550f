"""The import-linter contracts bite: one wrong import per contract breaks it, and the clean tree keeps them all.

gate/, worker/ and pyproject.toml are copied into a temporary directory, every offending import is appended
to its module of the copy, and `lint-imports` runs there once; each breach's case then finds its own edge, by
its line, among its contract's broken imports. The working directory and PYTHONPATH both point at
the copy, so grimp builds its graph from the copied files rather than the installed (editable) packages; the
clean-copy test, which must pass where every modified copy fails, is the check that this is so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.paths import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS: dict[str, str] = {
    contract["id"]: contract["name"]
    for contract in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
}


@dataclass(frozen=True)
class Breach:
    """One deliberately wrong import: the contract it breaks, where it goes and the edge the report names."""

    contract: str
    path: str
    line: str
    importer: str
    imported: str


BREACHES = [
    Breach("core-is-pure", "gate/core/verdicts/verdict.py", "import docker", "gate.core.verdicts.verdict", "docker"),
    # logging is standard library: import-linter sees it only because include_external_packages is on.
    Breach("core-is-pure", "gate/core/verdicts/verdict.py", "import logging", "gate.core.verdicts.verdict", "logging"),
    Breach("gate-layers", "gate/run/waves.py", "from gate.cli.main import main", "gate.run.waves", "gate.cli.main"),
    # The core's rooms: an upward import, two between side-by-side rooms, and one out of errors.
    Breach(
        "core-rooms",
        "gate/core/verdicts/verdict.py",
        "from gate.core.card.card import VerdictCard",
        "gate.core.verdicts.verdict",
        "gate.core.card.card",
    ),
    Breach(
        "core-rooms",
        "gate/core/policy/ledger.py",
        "from gate.core.trust.hitrate import outliers",
        "gate.core.policy.ledger",
        "gate.core.trust.hitrate",
    ),
    Breach(
        "core-rooms",
        "gate/core/checks.py",
        "import gate.core.policy.ledger",
        "gate.core.checks",
        "gate.core.policy.ledger",
    ),
    Breach(
        "core-rooms", "gate/core/errors.py", "import gate.core.suite.trial", "gate.core.errors", "gate.core.suite.trial"
    ),
    Breach(
        "gate-reaches-worker-only-from-cli",
        "gate/io/artifacts.py",
        "import worker.host.sweep",
        "gate.io.artifacts",
        "worker.host.sweep",
    ),
    Breach(
        "redis-books-picked-by-cli",
        "gate/run/baseline.py",
        "from gate.io.redisbooks import RedisBooks",
        "gate.run.baseline",
        "gate.io.redisbooks",
    ),
    Breach("terminal-only-in-cli", "gate/run/waves.py", "import rich.progress", "gate.run.waves", "rich"),
    Breach(
        "worker-below-gate-cli",
        "worker/host/sweep.py",
        "from gate.run.runner import run_gate",
        "worker.host.sweep",
        "gate.run.runner",
    ),
    Breach(
        "worker-layers",
        "worker/host/sweep.py",
        "import worker.celery.shared.app",
        "worker.host.sweep",
        "worker.celery.shared.app",
    ),
    # Celery's sides: the coordinator's reaching into the worker's, and the shared part reaching up.
    Breach(
        "celery-sides",
        "worker/celery/coordinator/dispatch.py",
        "import worker.celery.worker.signing",
        "worker.celery.coordinator.dispatch",
        "worker.celery.worker.signing",
    ),
    Breach(
        "celery-sides",
        "worker/celery/shared/wire.py",
        "import worker.celery.coordinator.answers",
        "worker.celery.shared.wire",
        "worker.celery.coordinator.answers",
    ),
    # The doubles at their homes: the spec factories, the executor double (from inside gate.run, whose package
    # holds it) and the stub sandbox (from the command line, and from Celery beside the one import allowed).
    Breach(
        "no-test-doubles-in-production",
        "worker/celery/worker/tasks.py",
        "from gate.core.testing import make_spec",
        "worker.celery.worker.tasks",
        "gate.core.testing",
    ),
    Breach(
        "no-test-doubles-in-production",
        "gate/run/waves.py",
        "from gate.run.executors.mock import MockExecutor",
        "gate.run.waves",
        "gate.run.executors.mock",
    ),
    Breach(
        "no-test-doubles-in-production",
        "gate/run/executors/local.py",
        "from gate.run.executors.mock import MockExecutor",
        "gate.run.executors.local",
        "gate.run.executors.mock",
    ),
    Breach(
        "no-test-doubles-in-production",
        "gate/cli/executors.py",
        "from worker.host.sandboxes.stub import StubSandbox",
        "gate.cli.executors",
        "worker.host.sandboxes.stub",
    ),
    Breach(
        "no-test-doubles-in-production",
        "worker/celery/coordinator/dispatch.py",
        "from worker.host.sandboxes.stub import StubSandbox",
        "worker.celery.coordinator.dispatch",
        "worker.host.sandboxes.stub",
    ),
    Breach(
        "box-imports-nothing-of-ours",
        "worker/box/fsdiff.py",
        "import gate.core.verdicts.verdict",
        "worker.box.fsdiff",
        "gate.core.verdicts.verdict",
    ),
]


def copy_tree(dest: Path) -> Path:
    """Copy gate/, worker/ and pyproject.toml into dest (without bytecode caches) and return dest."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("gate", "worker"):
        shutil.copytree(ROOT / package, dest / package, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    """Run lint-imports on the copy in where, wide enough that no contract name is wrapped."""
    env = {**os.environ, "PYTHONPATH": str(where), "COLUMNS": "300", "NO_COLOR": "1"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=where, env=env, capture_output=True, text=True, timeout=120
    )


def status_of(output: str, contract_id: str) -> str:
    """The word (KEPT or BROKEN) the contract's summary line ends on in the report."""
    name = CONTRACTS[contract_id]
    lines = [line for line in output.splitlines() if line.startswith(f"{name} ")]
    assert len(lines) == 1, f"no single summary line for {name!r} in:\n{output}"
    return lines[0][len(name) :].split()[0]


def broken_section(output: str, contract_id: str) -> str:
    """The text of the contract's part of the "Broken contracts" report, up to the next contract's heading."""
    lines = output.splitlines()
    headings = [
        i
        for i in range(len(lines) - 1)
        if lines[i] and set(lines[i + 1]) == {"-"} and len(lines[i + 1]) == len(lines[i])
    ]
    name = CONTRACTS[contract_id]
    starts = [i for i in headings if lines[i] == name]
    assert len(starts) == 1, f"no section for {name!r} in:\n{output}"
    ends = [i for i in headings if i > starts[0]]
    return "\n".join(lines[starts[0] : ends[0] if ends else len(lines)])


def test_every_contract_has_a_breach():
    """Each contract in pyproject.toml has at least one deliberate breach below, and no breach names a stranger."""
    assert {breach.contract for breach in BREACHES} == set(CONTRACTS)
    assert len(CONTRACTS) == 11


def test_clean_copy_keeps_every_contract(tmp_path):
    """lint-imports on an unmodified copy exits 0 with every contract KEPT."""
    done = lint_imports(copy_tree(tmp_path))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert {contract_id: status_of(output, contract_id) for contract_id in CONTRACTS} == dict.fromkeys(
        CONTRACTS, "KEPT"
    )
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in output


@pytest.fixture(scope="module")
def all_breached(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[Breach, int]]:
    """lint-imports' report on one copy holding every breach at once, and the line each breach landed on: one
    graph build instead of one per breach (each took about 0.4 s of CPU)."""
    where = copy_tree(tmp_path_factory.mktemp("breached"))
    lines: dict[Breach, int] = {}
    for breach in BREACHES:
        module = where / breach.path
        source = module.read_text()
        source += ("" if source.endswith("\n") else "\n") + breach.line + "\n"
        module.write_text(source)
        lines[breach] = len(source.splitlines())
    done = lint_imports(where)
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout + done.stderr, lines


@pytest.mark.parametrize("breach", BREACHES, ids=lambda breach: f"{breach.contract}:{breach.line}")
def test_wrong_import_breaks_its_contract(all_breached, breach):
    """The wrong import, appended to the copy, marks its contract BROKEN and is named, with its line, among
    that contract's broken edges (the report names each offending import on its own)."""
    output, lines = all_breached
    assert status_of(output, breach.contract) == "BROKEN", output
    section = broken_section(output, breach.contract)
    assert f"{breach.importer} -> {breach.imported} (l.{lines[breach]})" in section, output
