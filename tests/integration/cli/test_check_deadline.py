"""A check with a catastrophic regex, run by the real `gate run --base` (console script, git, Docker): the
patch prints the output that makes it backtrack forever, and the run still ends, with a card, the trial a
miss at the suite's check deadline, and no check process left behind."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from gate_runs import GATE
from test_init import SLUGIFY, commit_all, gate, git

from gate.core.errors import RET_BLOCKED, RET_OK

SUITE = """\
[suite]
name = "deadline"
probe = "python3 probe.py"
fixtures = "fixtures"
checks = "checks.py"
seal = "fixtures.seal"
card = ".probegate/verdict-card.json"
outputs = [".probegate/*"]
check_deadline_s = 1.0

[[property]]
id = "stays_in_bounds"
band = "safety"
fixture = "requests/hello.json"
check = "checks:stays_in_bounds"
deadline_s = 5.0
params = { write_map = [] }

[[property]]
id = "exact_answer"
band = "contract"
fixture = "requests/hello.json"
check = "checks:exact_answer"
deadline_s = 5.0
"""

# Rejects an answer that is nothing but a's: linear on an honest answer, exponential on "aaa…a!".
BOMB = """

import re as _re


def _not_only_as(got):
    assert not _re.fullmatch(r"(a+)+", got), "an answer of nothing but a's"
"""


def coordinators_children(pid: int) -> list[int]:
    """Check processes started by the coordinator `pid` (their command line names it), alive or not reaped."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"gate.io.checkchild" in arg for arg in argv) and str(pid).encode() in argv:
            found.append(int(entry.name))
    return found


def test_a_regex_bomb_on_the_patch_output_is_a_miss_at_the_deadline_and_the_run_ends(
    tmp_path: Path, sandbox_image: str
) -> None:
    """The patch's output sends the base's check into catastrophic backtracking: `gate run` ends (exit 1,
    a card) within seconds, that row fail_contract saying the check timed out after 1s, the safety row
    pass, and the coordinator's check process is gone."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "textkit.py").write_text(SLUGIFY)
    commit_all(repo, "a tiny module")
    assert gate(repo, "init").returncode == RET_OK
    (repo / "gate.toml").write_text(SUITE)
    probe = repo / "probe.py"
    stand_in = SLUGIFY.split('"""\n')[1]
    call = "    from textkit import slugify\n\n    return slugify(text)\n"
    probe.write_text(probe.read_text().replace(stand_in, call, 1))
    checks = repo / "checks.py"
    source = checks.read_text() + BOMB
    source = source.replace('    out = trial.stdout_json()\n    expect = trial.fixture_json()["expect"]\n',
                            '    out = trial.stdout_json()\n    _not_only_as(out["output"])\n'
                            '    expect = trial.fixture_json()["expect"]\n', 1)  # fmt: skip
    assert "_not_only_as(out" in source
    checks.write_text(source)
    commit_all(repo, "the suite, whose exact_answer check rejects runs of a's")
    (repo / "textkit.py").write_text('def slugify(text):\n    return "a" * 64 + "!"\n')
    commit_all(repo, "a patch whose output makes the check backtrack")

    started = time.monotonic()
    ran = subprocess.Popen(
        [str(GATE), "--log-level", "warning", "run", "--base", "HEAD~1"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = ran.communicate(timeout=120)
    took = time.monotonic() - started
    assert "Traceback" not in stderr, stderr
    assert ran.returncode == RET_BLOCKED, stderr
    card = json.loads((repo / ".probegate" / "verdict-card.json").read_text())
    rows = {row["id"]: row for row in card["properties"]}
    assert rows["exact_answer"]["kind"] == "fail_contract"
    assert rows["exact_answer"]["detail"] == "trial 0: check timed out after 1s"
    assert rows["stays_in_bounds"]["kind"] == "pass"
    assert took < 60
    assert coordinators_children(ran.pid) == []
