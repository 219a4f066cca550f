"""gate.io.checkproc: checks judged in a child process bounded in time and memory, driven directly with
observations (no Docker). A check that hangs, allocates without bound or dies on the patch's output is
a miss on that trial and judging goes on in a fresh child; every other result means what it meant."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.mini_suite import CONTRACT, build_suite, good, run
from support.paths import INVOICE as EXAMPLE

from gate.core.checks import Trial
from gate.core.errors import HarnessError, SuiteError
from gate.core.suite.suite import SuiteConfig
from gate.core.suite.trial import Captured, ClockSpec, FaultOrigin, FileChange, Observation, TrialSpec
from gate.core.verdicts.verdict import Band, OutcomeKind
from gate.io import checkproc
from gate.io.checkproc import CheckProcess, InProcess
from gate.io.checks import ChecksModule, read_checks_module
from gate.io.suite import load_suite

CHECKS = textwrap.dedent(
    '''
    import json
    import os
    import re
    import signal
    import sys


    def bomb(trial):
        """Catastrophic backtracking on crafted output: stuck in C code, no thread or alarm stops it."""
        return re.fullmatch(r"(a+)+", trial.stdout) is not None


    def hog(trial):
        """Allocates without bound, a little more for every byte of output. bytes(n) is calloc'd: the address
        space bound stops it after a few blocks without a page touched, however busy the machine."""
        kept = []
        while True:
            kept.append(bytes(64 * 1024 * 1024 + len(trial.stdout)))


    def nested(trial):
        """Parses the output as JSON: a deep enough nesting raises RecursionError."""
        return isinstance(json.loads(trial.stdout), list)


    def segfault(trial):
        os.kill(os.getpid(), signal.SIGSEGV)


    def chatty(trial):
        """Prints to stdout and stderr: none of it may reach the protocol."""
        print("a check printing", trial.stdout)
        print("on stderr too", file=sys.stderr)
        sys.stdout.flush()
        os.write(1, b"raw bytes on descriptor 1\\n")
        return trial.stdout == "ok"


    def holds(trial):
        return True


    def none(trial):
        return None


    def false(trial):
        return False


    def number(trial):
        return 1


    def asserts(trial):
        assert trial.stdout == "ok", f"said {trial.stdout!r}"
        return True


    def raises(trial):
        raise ValueError("a unit suffix: " + trial.stdout)


    def exits(trial):
        sys.exit(3)


    def interrupts(trial):
        raise KeyboardInterrupt
    '''
).encode()

NAMES = {
    name: f"checks:{name}"
    for name in (
        "bomb",
        "hog",
        "nested",
        "segfault",
        "chatty",
        "holds",
        "none",
        "false",
        "number",
        "asserts",
        "raises",
        "exits",
        "interrupts",
    )
}
NAMES["builtin_writes"] = "builtin:no_unmapped_write"
MODULE = ChecksModule(path=Path("/oracle/checks.py"), names=NAMES, suite_file="gate.toml", source=CHECKS)
CLOCK = ClockSpec.model_validate({"frozen_at": "2026-03-01T00:00:00Z"})


def trial(stdout: str | bytes = "ok", index: int = 0, **facts: object) -> Trial:
    data = stdout if isinstance(stdout, bytes) else stdout.encode()
    captured = Captured(data=data, length=len(data), sha256=hashlib.sha256(data).hexdigest())
    obs = Observation(run_id="r", property_id="p", trial_index=index, exit_code=0, stdout=captured, **facts)
    return Trial(observation=obs, fixture=b'{"n": 1}', params={"write_map": ["out/*"]}, clock=CLOCK)


@pytest.fixture(scope="module")
def checks() -> Iterator[CheckProcess]:
    """One check process for the module's tests (a fresh one follows each kill)."""
    with CheckProcess(MODULE, deadline_s=2.0, memory_mb=256) as process:
        yield process


def alive(pid: int) -> bool:
    """Whether `pid` is still a check process (a reaped one leaves no /proc entry)."""
    try:
        return b"gate.io.checkchild" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_a_regex_bomb_on_crafted_output_is_a_miss_within_the_deadline() -> None:
    """A catastrophic regex on the patch's output is a miss saying the deadline, within it, and the next
    trial is judged by a fresh child."""
    with CheckProcess(MODULE, deadline_s=1.0, memory_mb=256) as process:
        assert process.judge("bomb", trial("aaaa"), Band.CONTRACT).kind is OutcomeKind.HIT  # loaded, warm
        first = process.pid
        started = time.monotonic()
        outcome = process.judge("bomb", trial("a" * 64 + "!", index=1), Band.CONTRACT)
        took = time.monotonic() - started
        assert (outcome.kind, outcome.trial_index, outcome.check_raised) == (OutcomeKind.MISS, 1, True)
        assert outcome.detail == "check timed out after 1s"
        assert 1.0 <= took < 2.5
        assert first is not None and not alive(first)
        assert process.judge("holds", trial(index=2), Band.CONTRACT).kind is OutcomeKind.HIT
        assert process.started == 2


def test_a_check_that_allocates_without_bound_is_a_miss_and_judging_goes_on(checks: CheckProcess) -> None:
    """A check that allocates until the address space bound stops it is a miss saying so; the coordinator
    carries on and the next trial gets a fresh child."""
    before = checks.started
    outcome = checks.judge("hog", trial("x" * 1000), Band.SAFETY)
    assert (outcome.kind, outcome.check_raised) == (OutcomeKind.MISS, True)
    assert outcome.detail == "check ran out of memory (check_memory_mb = 256)"
    assert checks.judge("holds", trial(), Band.SAFETY).kind is OutcomeKind.HIT
    assert checks.started == before + 1


def test_a_deep_nesting_is_judged_as_it_was_in_process(checks: CheckProcess) -> None:
    """Output nested 100,000 deep makes the check raise RecursionError: the same miss as in the coordinator."""
    deep = trial("[" * 100_000 + "]" * 100_000)
    here = InProcess(MODULE.load()).judge("nested", deep, Band.CONTRACT)
    there = checks.judge("nested", deep, Band.CONTRACT)
    assert there == here
    assert there.kind is OutcomeKind.MISS and there.detail.startswith("check raised RecursionError")


def test_a_check_that_takes_its_process_down_is_a_miss(checks: CheckProcess) -> None:
    """A check that crashes the interpreter is a miss naming how the child ended, not a crashed gate."""
    outcome = checks.judge("segfault", trial(), Band.CONTRACT)
    assert (outcome.kind, outcome.check_raised) == (OutcomeKind.MISS, True)
    assert outcome.detail == "the check process died while judging (killed by SIGSEGV)"
    assert checks.judge("holds", trial(), Band.CONTRACT).kind is OutcomeKind.HIT


def test_a_check_raising_keyboard_interrupt_is_a_miss_not_an_interrupted_run(checks: CheckProcess) -> None:
    """What `judge` lets through (KeyboardInterrupt raised by the check itself) is a miss on the trial."""
    outcome = checks.judge("interrupts", trial(), Band.CONTRACT)
    assert (outcome.kind, outcome.detail) == (OutcomeKind.MISS, "check did not return: KeyboardInterrupt")


@pytest.mark.parametrize(
    ("name", "stdout", "band", "facts"),
    [
        ("holds", "ok", Band.CONTRACT, {}),
        ("none", "ok", Band.CONTRACT, {}),
        ("false", "ok", Band.CONTRACT, {}),
        ("number", "ok", Band.STATISTICAL, {}),
        ("asserts", "ok", Band.CONTRACT, {}),
        ("asserts", b"\x1b[2Jnot ok\xff", Band.CONTRACT, {}),
        ("raises", "12 EUR", Band.CONTRACT, {}),
        ("exits", "ok", Band.SAFETY, {}),
        ("chatty", "ok", Band.CONTRACT, {}),
        ("chatty", "no", Band.CONTRACT, {}),
        ("holds", "ok", Band.SAFETY, {"timed_out": True, "duration_s": 2.5}),
        ("holds", "ok", Band.CONTRACT, {"timed_out": True, "duration_s": 2.5}),
        ("hog", "ok", Band.CONTRACT, {"fault": "the engine went away", "fault_origin": FaultOrigin.HARNESS}),
        ("holds", "ok", Band.CONTRACT, {"fault": "tree too large", "fault_origin": FaultOrigin.PATCH}),
        ("builtin_writes", "ok", Band.SAFETY, {"writes": (FileChange(path="/work/out/a", change="created"),)}),
        ("builtin_writes", "ok", Band.SAFETY, {"writes": (FileChange(path="/etc/passwd", change="modified"),)}),
        # What JSON could not carry exactly (a NaN, a lone surrogate) reaches the check as it was.
        ("builtin_writes", "ok", Band.SAFETY, {"writes": (FileChange(path="/etc/\udcff", change="created"),)}),
        ("holds", "ok", Band.SAFETY, {"timed_out": True, "duration_s": float("nan")}),
    ],
)
def test_ordinary_results_and_exceptions_mean_what_they_meant(
    checks: CheckProcess, name: str, stdout: str | bytes, band: Band, facts: dict
) -> None:
    """Every ordinary return, exception, fault and timed-out trial gives the outcome judging in the
    coordinator gave (a check's print() never reaches the protocol)."""
    seen = trial(stdout, index=7, **facts)
    assert checks.judge(name, seen, band) == InProcess(MODULE.load()).judge(name, seen, band)


def invoice_observations(prop: str, fixture: bytes) -> list[Observation]:
    """Observations of one invoice property: a good answer and the ways a patch gets it wrong."""
    invoice = json.loads(fixture)

    def out(payload: object, **facts: object) -> Observation:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        length = facts.pop("length", len(data))
        facts.setdefault("exit_code", 0)
        captured = Captured(data=data, length=length, sha256=hashlib.sha256(data).hexdigest())
        return Observation(run_id="r", property_id=prop, trial_index=0, stdout=captured, **facts)

    right = {
        "invoice_id": "inv-001",
        "currency": "EUR",
        "net": "10.00",
        "tax": "2.10",
        "total": invoice.get("expected_total", "0"),
        "issued_at": "2026-03-01T00:00:00Z",
        "tool": invoice.get("expected_tool", ""),
    }
    return [
        out(right),
        out({k: v for k, v in right.items() if k not in ("tool",)}),
        out({**right, "total": "12.11"}),
        out({**right, "issued_at": "2026-03-02T00:00:00Z"}),
        out({**right, "tool": "shell.exec"}),
        out([1, 2, 3]),
        out(b"Traceback (most recent call last):", exit_code=1),
        out(right, length=10**6),
        out(right, writes=(FileChange(path="/work/src/app.py", change="modified"),)),
        out(right, canary_seen=True),
        out(right, timed_out=True, duration_s=5.1),
    ]


def test_the_invoice_example_gives_the_same_outcomes_through_the_child() -> None:
    """The invoice example's checks, builtins and suite functions, judge every observation through the
    child exactly as they did in the coordinator."""
    suite = load_suite(EXAMPLE / "gate.toml")
    module = read_checks_module(
        suite.checks_path, {p.id: p.check for p in suite.properties}, suite_file=str(suite.path)
    )
    here = InProcess(module.load())
    compared = 0
    with CheckProcess(module, deadline_s=5.0, memory_mb=1024) as there:
        for prop in suite.properties:
            fixture = (EXAMPLE / "fixtures" / prop.fixture).read_bytes()
            for obs in invoice_observations(prop.id, fixture):
                seen = Trial(obs, fixture, prop.params, CLOCK)
                assert there.judge(prop.id, seen, prop.band) == here.judge(prop.id, seen, prop.band), obs
                compared += 1
        assert there.started == 1
    assert compared == 55


def test_the_child_imports_nothing_from_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started from a folder holding a `json.py` and a `gate/` that would take over (a patched tree), the
    child still runs the oracle's checks: `python -I` keeps the current folder off its path."""
    (tmp_path / "json.py").write_text("raise SystemExit('hijacked')\n")
    (tmp_path / "gate").mkdir()
    (tmp_path / "gate" / "__init__.py").write_text("raise SystemExit('hijacked')\n")
    monkeypatch.chdir(tmp_path)
    with CheckProcess(MODULE, deadline_s=5.0, memory_mb=256) as process:
        assert process.judge("nested", trial("[]"), Band.CONTRACT).kind is OutcomeKind.HIT


def test_a_checks_module_that_cannot_load_within_the_bound_names_the_key() -> None:
    """A checks module that needs more than check_memory_mb just to load is refused as a suite error
    naming gate.toml and the key, never judged as the patch's miss."""
    greedy = ChecksModule(
        path=Path("/oracle/checks.py"),
        names={"p": "checks:f"},
        suite_file="gate.toml",
        source=b"TABLE = bytearray(512 * 1024 * 1024)\ndef f(trial):\n    return True\n",
    )
    with CheckProcess(greedy, deadline_s=5.0, memory_mb=256) as process, pytest.raises(SuiteError) as info:
        process.judge("p", trial(), Band.CONTRACT)
    assert (info.value.file, info.value.field) == ("gate.toml", "suite.check_memory_mb")
    assert "MemoryError" in str(info.value)


def test_a_child_that_cannot_be_started_is_a_harness_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """No process to be had is the machine's fault: a HarnessError (every row harness_error), never a miss."""
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    with (
        pytest.raises(HarnessError, match="cannot start the check process"),
        CheckProcess(MODULE, deadline_s=5.0, memory_mb=256),
    ):
        pass


def test_the_child_is_reaped_when_the_run_ends_and_when_it_is_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole run's check process is gone (killed and reaped) once run_gate returns, and when Ctrl-C
    stops the run halfway."""
    made: list[CheckProcess] = []
    pids: list[int] = []

    def recording(module: ChecksModule, config: SuiteConfig) -> CheckProcess:
        made.append(checkproc.judging(module, config))
        return made[-1]

    def watching(spec: TrialSpec, fixture: bytes) -> Observation:
        if made and made[-1].pid is not None:
            pids.append(made[-1].pid)
        if spec.property_id == CONTRACT and len(made) == 2:
            raise KeyboardInterrupt
        return good(spec, fixture)

    suite = build_suite(tmp_path)
    result, _ = run(suite, watching, judge_factory=recording)
    assert {row.kind for row in result.card.properties} == {"pass"}
    assert made[0].started == 1 and made[0].pid is None
    suite.ledger.unlink()  # the request asks for new books
    with pytest.raises(KeyboardInterrupt):
        run(suite, watching, judge_factory=recording)
    assert made[1].pid is None
    assert len(set(pids)) == 2 and not any(alive(pid) for pid in pids)


COORDINATOR = """
from pathlib import Path
from gate.core.checks import Trial
from gate.core.suite.trial import Captured, Observation
from gate.core.verdicts.verdict import Band
from gate.io.checkproc import CheckProcess
from gate.io.checks import ChecksModule

def trial(text):
    return Trial(Observation(run_id="r", property_id="p", trial_index=0, stdout=Captured(data=text)), b"")

module = ChecksModule(path=Path("/oracle/checks.py"), names={names!r}, suite_file="gate.toml", source={source!r})
process = CheckProcess(module, deadline_s=600.0, memory_mb=256).__enter__()
process.judge("holds", trial(b"ok"), Band.CONTRACT)
print(process.pid, flush=True)
process.judge("bomb", trial(b"a" * 64 + b"!"), Band.CONTRACT)
"""


def running(pid: int) -> bool:
    """Whether `pid` is on a CPU or ready for one (a child stuck in a regex), not waiting for a request."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
    except OSError:
        return False


def test_the_child_dies_with_a_killed_coordinator(tmp_path: Path) -> None:
    """A coordinator SIGKILLed while a check is stuck in C code leaves no orphan: the kernel kills the child."""
    script = tmp_path / "coordinator.py"
    script.write_text(COORDINATOR.format(names=NAMES, source=CHECKS))
    coordinator = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert coordinator.stdout is not None
        child = int(coordinator.stdout.readline())
        assert alive(child)
        deadline = time.monotonic() + 30
        while not running(child) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert running(child)  # inside the regex, where nothing but a signal stops it
        coordinator.kill()
        coordinator.wait(timeout=10)
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child)
    finally:
        coordinator.kill()
        coordinator.wait()
        if coordinator.stdout is not None:
            coordinator.stdout.close()
