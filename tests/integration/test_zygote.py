"""The tests' zygote (tests/support/zygote.py) gives each command what a process of its own would have: its pid,
environment, working folder, output, exit status and fresh random state; what a fork cannot give, it refuses."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from support.zygote import gate_command

PROBE = """import json, os, random, sys
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "said": os.environ.get("SAID"),
                  "draw": random.random(), "argv": sys.argv[1:]}))
print("to stderr", file=sys.stderr)
sys.exit(3)
"""


def test_each_command_is_a_process_of_its_own(tmp_path: Path) -> None:
    """Two commands: their own pids (neither this process nor each other), the environment and folder asked for,
    both streams, the exit status, and different random draws."""
    (tmp_path / "zprobe.py").write_text(PROBE)
    seen = []
    for said in ("one", "two"):
        env = {**os.environ, "SAID": said}
        done = gate_command("zprobe", sys.executable, ["a", "b"], env=env, cwd=tmp_path, timeout=60)
        assert (done.returncode, done.stderr) == (3, "to stderr\n"), done
        seen.append(json.loads(done.stdout))
    assert [s["said"] for s in seen] == ["one", "two"] and {s["cwd"] for s in seen} == {str(tmp_path)}
    assert seen[0]["argv"] == ["a", "b"]
    assert len({s["pid"] for s in seen} | {os.getpid()}) == 3 and os.getpid() not in {s["ppid"] for s in seen}
    assert seen[0]["draw"] != seen[1]["draw"]


def test_an_environment_the_interpreter_reads_at_start_runs_as_a_plain_subprocess(tmp_path: Path) -> None:
    """A PYTHON* variable the zygote did not start with cannot reach a forked child: the command starts for real."""
    (tmp_path / "zprobe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONHASHSEED": "7", "SAID": "plain"}
    done = gate_command("zprobe", sys.executable, [], env=env, cwd=tmp_path, timeout=60)
    assert done.args[:2] == [sys.executable, "-m"] and json.loads(done.stdout)["ppid"] == os.getpid()
