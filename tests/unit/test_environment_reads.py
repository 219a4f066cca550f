"""Settings come from the environment at the entry points alone (gate.cli.main, gate-worker's cli): every
other read of the environment in shipped code is listed here with the reason it is not a setting."""

from __future__ import annotations

import re

from support.paths import ROOT

READS = re.compile(r"os\.environ\b|os\.getenv\(|\bgetenv\(")

ENTRY_POINTS = {
    "gate/cli/main.py": "the `gate` command: GateSettings.from_env",
    "worker/celery/worker/cli.py": "`gate-worker`: WorkerSettings.from_env",
}
NOT_SETTINGS = {
    "gate/cli/scaffold/probe.py": "the text of the probe `gate init` writes, which runs in the sandbox",
    "gate/io/treeselect.py": "git's own environment, handed to git without the variables that relocate a repository",
    "worker/host/preflight.py": "the text of the preflight probe, which runs in the sandbox",
    "worker/box/warmparent.py": "the in-container warm parent sets up each child's environment",
}


def readers() -> set[str]:
    """The modules of gate/ and worker/ that touch the process environment."""
    found = set()
    for package in ("gate", "worker"):
        for path in (ROOT / package).rglob("*.py"):
            lines = path.read_text(encoding="utf-8").splitlines()
            code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
            if READS.search(code):
                found.add(path.relative_to(ROOT).as_posix())
    return found


def test_only_the_entry_points_read_settings_from_the_environment() -> None:
    """No module below the two entry points reads the environment, but those listed with their reason."""
    assert readers() == set(ENTRY_POINTS) | set(NOT_SETTINGS)


def test_no_listed_exception_reads_a_probegate_variable() -> None:
    """The exceptions read no PROBEGATE_* setting of the host (the sandbox's texts name the trial's own)."""
    for name in ("gate/io/treeselect.py", "worker/box/warmparent.py"):
        assert "PROBEGATE_" not in (ROOT / name).read_text(encoding="utf-8"), name
