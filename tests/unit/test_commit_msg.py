"""The commit message rule (.ci/commit-msg): what it refuses and what it lets through."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess

import pytest
from support.paths import ROOT

SCRIPT = ROOT / ".ci" / "commit-msg"


def load():
    loader = importlib.machinery.SourceFileLoader("commit_msg", str(SCRIPT))
    spec = importlib.util.spec_from_loader("commit_msg", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


RULE = load()
BODY = "\n\nWhy it changed, and what was measured.\n"


@pytest.mark.parametrize(
    "message",
    [
        "Add the knobs to the trial spec" + BODY,
        "Seed the sandbox from the plan" + BODY,
        "Pass the worker's settings down" + BODY,
        "Fix a typo\n\nBody.\n# a git comment line\n",
    ],
)
def test_a_message_that_holds(message: str) -> None:
    """An imperative subject of 72 characters at most, a blank line and a body: nothing to say."""
    assert RULE.problems(message) == []


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("x" * 73 + BODY, "73 characters"),
        ("Added the knobs" + BODY, "imperative"),
        ("Adds the knobs" + BODY, "imperative"),
        ("Adding the knobs" + BODY, "imperative"),
        ("add the knobs" + BODY, "capital"),
        ("Add the knobs." + BODY, "period"),
        ("Add the knobs\n", "no body"),
        ("Add the knobs\nWhy, without the blank line\n", "no body"),
        ("\n\nbody only\n", "no subject"),
    ],
)
def test_a_message_that_breaks_the_rule_is_named(message: str, said: str) -> None:
    """Each breach is named in words a contributor can act on."""
    assert any(said in why for why in RULE.problems(message)), RULE.problems(message)


def test_the_history_since_the_rule_holds() -> None:
    """Every commit after RULE_FROM follows the rule (what .ci/quick and .ci/run check)."""
    done = subprocess.run([str(SCRIPT)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
