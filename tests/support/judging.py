"""Judging for tests of the run around the checks: the checks module loaded and called in the test's own
process (as MockExecutor stands in for the sandbox); nothing the command line starts judges this way."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gate.core.checks import Check
from gate.core.suite.suite import SuiteConfig
from gate.io.checkproc import InProcess
from gate.io.checks import ChecksModule, read_checks_module


def in_process(module: ChecksModule, config: SuiteConfig) -> InProcess:
    """A JudgeFactory that judges in this process, unbounded (the run's is `gate.io.checkproc.judging`)."""
    return InProcess(module.load())


def load_checks(checks_path: Path, names: Mapping[str, str], *, suite_file: str) -> dict[str, Check]:
    """Every property's `module:function` resolved to a callable; errors name the property."""
    return read_checks_module(checks_path, names, suite_file=suite_file).load()
