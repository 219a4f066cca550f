"""The `gate` console script end to end, in a subprocess: a refusal is one line on stderr with a
documented exit code and no traceback, `--version`, a closed stdout, and the refusals that need a real
engine: one that must leave the engine without a container, one that comes after the sandbox opened.
Every other bad input is refused in process, in tests/unit/cli/test_cli_inputs.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import assert_one_line, run_args
from support.paths import INVOICE as EXAMPLE

import gate as gate_package
from gate.core.errors import RET_CONFIG, RET_NOINPUT, RET_OK, RET_USAGE

GATE = [sys.executable, "-m", "gate.cli"]
# The console script pip installed beside this interpreter (the entry point itself, gate.cli:entry).
SCRIPT = shutil.which("gate", path=os.path.dirname(sys.executable)) or shutil.which("gate")


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A private copy of the invoice example that a test may break."""
    dest = tmp_path / "invoice"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def gate(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m gate.cli` with ARGS."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*GATE, *args], capture_output=True, text=True, env=env, timeout=60)


def script(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed `gate` executable with ARGS."""
    assert SCRIPT is not None, "no `gate` console script installed beside the interpreter or on PATH"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, env=env, timeout=60)


def test_unknown_flag_is_usage_error(example: Path) -> None:
    """An unknown flag exits 64 (not argparse's 2, which would read as "harness broken")."""
    assert_one_line(script(*run_args(example, "--frobnicate")), RET_USAGE, "--frobnicate")


def test_version_prints_the_version() -> None:
    """`gate --version` prints gate.__version__ and exits 0."""
    done = script("--version")
    assert done.returncode == RET_OK, done.stderr
    assert done.stdout.strip() == f"gate {gate_package.__version__}"


def test_fixture_outside_seal_is_refused(example: Path) -> None:
    """A property bound to a file that is not in the sealed tree exits 65 naming the property."""
    text = (example / "gate.toml").read_text().replace("tools/refund-query.json", "tools/missing.json")
    (example / "gate.toml").write_text(text)
    # Checked once the seal is verified, after the books, with the sandbox open: this one needs the engine.
    done = gate(*run_args(example, "--new-ledger"))
    assert_one_line(done, RET_CONFIG, "property tool_choice_rate", "tools/missing.json")


# ---------------------------------------------------------------- refused before any container runs


def containers_started_by(pid: int, since: float) -> list[str]:
    """IDs of probe containers that process `pid` created since `since`, from the engine's event log
    (a container removed again at the end of a run still shows there)."""
    docker = shutil.which("docker")
    done = None
    if docker:
        window = ["--since", f"{since - 1:.3f}", "--until", f"{time.time():.3f}"]
        only = ["--filter", "type=container", "--filter", "event=create", "--filter", f"label=probegate.pid={pid}"]
        done = subprocess.run(
            [docker, "events", *window, *only, "--format", "{{.ID}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    if done is None or done.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the docker event log is unreadable: {done.stderr if done else 'no docker CLI'}")
        return []  # no engine here: nothing could have started anyway
    return done.stdout.split()


def gate_before_sandbox(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `gate` and assert it stopped before the sandbox: quickly, and with no container created."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    since = time.time()
    with subprocess.Popen([*GATE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        out, err = proc.communicate(timeout=60)
    elapsed = time.time() - since
    assert elapsed < 10, f"took {elapsed:.1f} s: did trials run before the refusal?"
    assert containers_started_by(proc.pid, since) == []
    assert out == "", out  # no verdict line: nothing was judged
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_missing_ledger_is_refused_before_any_trial(example: Path) -> None:
    """A run whose ledger file does not exist exits 66 naming it and hinting --new-ledger, before any container."""
    done = gate_before_sandbox(*run_args(example))
    assert_one_line(done, RET_NOINPUT, str(example / "out" / "ledger.json"), "--new-ledger")
    assert not (example / "out" / "ledger.json").exists()


# ---------------------------------------------------------------- a closed stdout

RET_PIPE = 141  # gate.cli.main: stdout's reader went away


def test_schema_into_a_closed_pipe_exits_quietly() -> None:
    """`gate schema card` writing to a pipe nobody reads exits 141 with nothing on stderr (no traceback)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before gate writes a byte
    try:
        done = subprocess.run(
            [*GATE, "schema", "card"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(write_end)
    assert done.returncode == RET_PIPE
    assert done.stderr == ""


def test_schema_piped_into_head_prints_no_traceback() -> None:
    """`gate schema card | head -1` prints the first line and nothing on stderr."""
    done = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$0" -m gate.cli schema card | head -1', sys.executable],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout == "{\n"
    assert done.stderr == ""
    assert done.returncode in (RET_OK, RET_PIPE)
