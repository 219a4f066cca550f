"""run_gate and accept over the patched tree as selected: a tree the sandbox cannot hold, or one with a
link out of it, is refused before the executor opens; the suite's card inside the tree is an output."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.mini_suite import Suite, build_suite, good, run_request

from gate.cli.accept import run_accept
from gate.core.errors import FixtureTreeError, TreeTooLargeError
from gate.run.executors.mock import MockExecutor


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return build_suite(tmp_path)


def add_to_suite(suite: Suite, text: str) -> None:
    """Insert `text` (keys of [suite] and its sub-tables) right after the [suite] table's keys."""
    path = suite.request.suite
    head, sep, rest = path.read_text().partition("\n[[property]]")
    path.write_text(head + text + sep + rest)


def refused_before_open(suite: Suite, error: type[Exception], match: str) -> None:
    executor = MockExecutor(good)
    with pytest.raises(error, match=match) as caught:
        run_request(suite.request, executor)
    assert "\n" not in str(caught.value)
    assert executor.calls == []  # never opened: no container could have started
    assert not suite.card.exists()


def test_a_tree_with_too_many_files_is_refused_before_the_executor_opens(suite: Suite) -> None:
    """More files than [suite.limits] tree_files: TreeTooLargeError (exit 65), no card, nothing run."""
    add_to_suite(suite, "\n[suite.limits]\ntree_files = 3\n")
    for index in range(3):
        (suite.request.workdir / f"m{index}.py").write_text("")
    refused_before_open(suite, TreeTooLargeError, r"tree holds 4 files and symlinks, over the sandbox's limit of 3")
    assert TreeTooLargeError.exit_code == 65


def test_a_file_over_the_file_size_limit_is_refused_before_the_executor_opens(suite: Suite) -> None:
    """A file larger than [suite.limits] file_size_mb (sparse here) is named and refused before any trial."""
    add_to_suite(suite, "\n[suite.limits]\nfile_size_mb = 1\ntmpfs_mb = 1024\n")
    with (suite.request.workdir / "data.bin").open("wb") as handle:
        handle.truncate(3 << 20)
    refused_before_open(suite, TreeTooLargeError, r"data.bin is 3.0 MB, over the sandbox's 1 MB file size limit")


def test_a_link_out_of_the_tree_is_refused_before_the_executor_opens(suite: Suite) -> None:
    """A symlink to the host's files in the patched tree is one FixtureTreeError line; nothing runs."""
    os.symlink("/etc/passwd", suite.request.workdir / "passwd.txt")
    refused_before_open(suite, FixtureTreeError, r"symlink passwd.txt -> /etc/passwd is absolute")


def test_excluded_files_are_not_counted_against_the_limits(suite: Suite) -> None:
    """Files left out by [suite] exclude are neither copied nor counted: the run goes ahead."""
    add_to_suite(suite, 'exclude = ["node_modules"]\n\n[suite.limits]\ntree_files = 3\n')
    for index in range(5):
        (suite.request.workdir / "node_modules" / f"m{index}.js").parent.mkdir(exist_ok=True)
        (suite.request.workdir / "node_modules" / f"m{index}.js").write_text("")
    executor = MockExecutor(good)
    result = run_request(suite.request, executor)
    assert result.card.exit_code == 0


def test_the_suites_card_inside_the_tree_is_left_out_so_accept_agrees(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    """`[suite] card` naming a file in the patched tree: the run may write it there, and the digest accept
    recomputes afterwards (the card now in the tree) is the card's own."""
    from dataclasses import replace

    add_to_suite(suite, 'card = "work/gate-card.json"\n')
    card = suite.request.workdir / "gate-card.json"
    request = replace(suite.request, card=card, ledger=suite.card.parent / "ledger.json")
    executor = MockExecutor(good)
    result = run_request(request, executor)
    assert card.exists() and result.card.exit_code == 0
    capsys.readouterr()
    run_accept(card, request.seal, workdir=request.workdir, suite=request.suite)
    reasons = json.loads(capsys.readouterr().out.splitlines()[-1])["reasons"]
    # Refused only for what a unit run lacks (no --base, a mock image), never for the tree.
    assert reasons and not any("the card was made for tree" in reason for reason in reasons), reasons
