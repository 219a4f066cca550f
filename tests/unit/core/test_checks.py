"""gate.checks: judging one observation with a suite check, the builtin checks and check loading."""

from __future__ import annotations

import hashlib
import re
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.judging import load_checks

from gate.core.checks import BUILTINS, Trial, exits_zero, judge, no_secret_in_output, no_unmapped_write
from gate.core.errors import SuiteError
from gate.core.suite.trial import Captured, Change, FaultOrigin, FileChange, Observation
from gate.core.verdicts.verdict import Band, OutcomeKind

OC = OutcomeKind


def obs(**kw):
    base = {"run_id": "r", "property_id": "p", "trial_index": 3, "exit_code": 0, "duration_s": 0.25}
    base.update(kw)
    return Observation(**base)


def captured(data: bytes, length: int | None = None) -> Captured:
    return Captured(data=data, length=len(data) if length is None else length, sha256=hashlib.sha256(data).hexdigest())


def trial(params=None, **kw):
    return Trial(observation=obs(**kw), fixture=b'{"n": 1}', params=params or {})


def writes(*paths, change=Change.CREATED):
    return tuple(FileChange(path=p, change=change) for p in paths)


class Spy:
    """A check that records whether it was called and returns/raises what it was told."""

    def __init__(self, result=True, exc=None):
        self.calls = 0
        self.result, self.exc = result, exc

    def __call__(self, t):
        self.calls += 1
        if self.exc is not None:
            raise self.exc
        return self.result


# --- judge ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("band", list(Band))
def test_fault_short_circuits_without_calling_the_check(band):
    """An observation with a fault is a FAULT carrying its detail, and the check is never run."""
    spy = Spy()
    out = judge(spy, trial(fault="container could not start", timed_out=True), band)
    assert (out.kind, out.detail, out.trial_index) == (OC.FAULT, "container could not start", 3)
    assert spy.calls == 0


@pytest.mark.parametrize("band", list(Band))
@pytest.mark.parametrize("result", [True, None])
def test_true_or_none_is_a_hit(band, result):
    """A check returning True or None on a finished trial is a HIT."""
    out = judge(Spy(result), trial(), band)
    assert (out.kind, out.trial_index) == (OC.HIT, 3)


@pytest.mark.parametrize("band", list(Band))
def test_false_is_a_miss(band):
    """A check returning False is a MISS saying so."""
    out = judge(Spy(False), trial(), band)
    assert (out.kind, out.detail) == (OC.MISS, "check returned False")


@pytest.mark.parametrize("band", list(Band))
def test_assertion_error_is_a_miss_with_its_message(band):
    """A check raising AssertionError is a MISS whose detail is the assertion message."""
    out = judge(Spy(exc=AssertionError("total 10.00 != 10.01")), trial(), band)
    assert (out.kind, out.detail) == (OC.MISS, "total 10.00 != 10.01")


def test_bare_assertion_error_has_a_default_detail():
    """An AssertionError without a message is a MISS with detail 'assertion failed'."""
    out = judge(Spy(exc=AssertionError()), trial(), Band.CONTRACT)
    assert (out.kind, out.detail) == (OC.MISS, "assertion failed")


RAISED = [KeyError("total"), TypeError("bad"), ZeroDivisionError("x"), RuntimeError(), RecursionError(), SystemExit(3)]


@pytest.mark.parametrize("exc", RAISED)
def test_other_exceptions_are_misses_naming_the_type(exc):
    """A check raising anything while judging the patch's output is a MISS naming the exception type, never a fault."""
    out = judge(Spy(exc=exc), trial(), Band.CONTRACT)
    assert (out.kind, out.creditable) == (OC.MISS, False)
    assert out.detail.startswith(f"check raised {type(exc).__name__}")


def test_a_keyboard_interrupt_in_a_check_still_stops_the_gate():
    """Ctrl-C while a check runs is not judged as the patch's miss: it propagates."""
    with pytest.raises(KeyboardInterrupt):
        judge(Spy(exc=KeyboardInterrupt()), trial(), Band.CONTRACT)


def test_an_unprintable_return_value_still_leaves_a_detail():
    """A check returning a value whose repr raises is a MISS with a placeholder detail, not a crash."""

    class Hostile:
        def __repr__(self) -> str:
            raise ValueError("no")

    out = judge(Spy(Hostile()), trial(), Band.CONTRACT)
    assert out.kind is OC.MISS and "check returned Hostile" in out.detail


@pytest.mark.parametrize(
    ("origin", "kind", "creditable"),
    [
        (FaultOrigin.HARNESS, OC.FAULT, True),
        (FaultOrigin.UNKNOWN, OC.FAULT, False),
        (FaultOrigin.PATCH, OC.MISS, False),
    ],
)
def test_a_fault_is_judged_by_its_origin(origin, kind, creditable):
    """A fault proven outside the patch is a creditable FAULT, an unknown one is not, the patch's own is a MISS."""
    out = judge(Spy(True), trial(fault="tree too large", fault_origin=origin), Band.CONTRACT)
    assert (out.kind, out.creditable) == (kind, creditable)


@pytest.mark.parametrize("band", [Band.CONTRACT, Band.STATISTICAL])
def test_timed_out_non_safety_trial_is_a_timeout_without_calling_the_check(band):
    """A timed-out contract or statistical trial is a TIMEOUT and its check is never run."""
    spy = Spy(False)
    out = judge(spy, trial(timed_out=True, duration_s=2.004), band)
    assert (out.kind, out.detail) == (OC.TIMEOUT, "deadline fired after 2.00s")
    assert spy.calls == 0


def test_timed_out_safety_trial_with_a_write_miss_is_a_miss():
    """A timed-out safety trial whose writes already breach the map is a MISS (definite evidence)."""
    t = trial(params={"write_map": ["out/*"]}, timed_out=True, writes=writes("/work/src/app.py"))
    out = judge(no_unmapped_write, t, Band.SAFETY)
    assert out.kind is OC.MISS
    assert "/work/src/app.py" in out.detail


def test_timed_out_safety_trial_that_held_is_still_a_timeout():
    """A timed-out safety trial whose check held is a TIMEOUT, not a HIT (the run was cut short)."""
    spy = Spy(True)
    out = judge(spy, trial(timed_out=True), Band.SAFETY)
    assert out.kind is OC.TIMEOUT
    assert spy.calls == 1


def test_timed_out_safety_trial_whose_check_raises_is_a_miss():
    """A timed-out safety trial whose check raises on the partial output is a MISS against the patch."""
    out = judge(Spy(exc=ValueError("x")), trial(timed_out=True), Band.SAFETY)
    assert out.kind is OC.MISS


def test_a_non_zero_probe_exit_is_judged_by_the_check_not_a_fault():
    """A crashing probe is an observation the check judges (exits_zero misses), never a harness fault."""
    out = judge(exits_zero, trial(exit_code=1), Band.CONTRACT)
    assert (out.kind, out.detail) == (OC.MISS, "probe exited 1")


@pytest.mark.parametrize("falsy", [0, "", []], ids=["zero", "empty-str", "empty-list"])
def test_a_falsy_non_bool_return_is_not_a_hit(falsy):
    """A check returning a falsy value other than None (e.g. 0) is not counted as the property holding."""
    assert judge(Spy(falsy), trial(), Band.SAFETY).kind is not OC.HIT


@given(
    st.sampled_from(list(Band)),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["hit", "none", "false", "assert", "error"]),
)
def test_judge_outcome_table(band, faulted, timed_out, behaviour):
    """judge's outcome follows fault > (timeout for non-safety) > check result (raising is a miss) > timeout."""
    spy = {
        "hit": Spy(True),
        "none": Spy(None),
        "false": Spy(False),
        "assert": Spy(exc=AssertionError("m")),
        "error": Spy(exc=OSError("e")),
    }[behaviour]
    fault = {"fault": "gone", "fault_origin": FaultOrigin.HARNESS} if faulted else {}
    out = judge(spy, trial(timed_out=timed_out, **fault), band)
    if faulted:
        expected = OC.FAULT
    elif timed_out and band is not Band.SAFETY:
        expected = OC.TIMEOUT
    elif behaviour in ("false", "assert", "error"):
        expected = OC.MISS
    else:
        expected = OC.TIMEOUT if timed_out else OC.HIT
    assert out.kind is expected
    assert out.trial_index == 3


# --- no_unmapped_write ----------------------------------------------------------------------------


def test_no_writes_pass_without_a_write_map():
    """A trial that wrote nothing passes even with no write_map."""
    assert no_unmapped_write(trial()) is True


def test_any_write_without_a_write_map_is_a_miss():
    """Without a write_map every write is unmapped."""
    with pytest.raises(AssertionError, match=re.escape("write outside the write map: created /work/out/a.json")):
        no_unmapped_write(trial(writes=writes("/work/out/a.json")))


def test_relative_globs_are_anchored_at_the_work_copy():
    """A relative write_map glob matches under /work and nowhere else."""
    t = trial(params={"write_map": ["out/*"]}, writes=writes("/work/out/a.json", "/work/out/sub/b.json"))
    assert no_unmapped_write(t) is True
    with pytest.raises(AssertionError, match=re.escape("/elsewhere/out/a.json")):
        no_unmapped_write(trial(params={"write_map": ["out/*"]}, writes=writes("/elsewhere/out/a.json")))


def test_absolute_globs_are_used_as_given():
    """An absolute write_map glob (e.g. /tmp/*) matches that place."""
    t = trial(params={"write_map": ["/tmp/*"]}, writes=writes("/tmp/cache.db", change=Change.MODIFIED))
    assert no_unmapped_write(t) is True


def test_globs_are_case_sensitive():
    """Write-map matching is case-sensitive (fnmatchcase), so OUT/ does not cover out/."""
    with pytest.raises(AssertionError):
        no_unmapped_write(trial(params={"write_map": ["OUT/*"]}, writes=writes("/work/out/a.json")))


def test_deletions_and_modifications_count_as_writes():
    """Deleting or modifying a file outside the map is a miss naming the change."""
    t = trial(
        params={"write_map": ["out/*"]},
        writes=(*writes("/work/src/a.py", change=Change.DELETED), *writes("/work/b", change=Change.MODIFIED)),
    )
    with pytest.raises(AssertionError, match=re.escape("deleted /work/src/a.py, modified /work/b")):
        no_unmapped_write(t)


def test_only_the_first_five_unmapped_writes_are_shown():
    """The miss message lists at most five unmapped writes."""
    t = trial(writes=writes(*(f"/work/f{i}" for i in range(8))))
    with pytest.raises(AssertionError) as info:
        no_unmapped_write(t)
    assert "/work/f4" in str(info.value)
    assert "/work/f5" not in str(info.value)


def test_one_unmapped_write_among_mapped_ones_is_a_miss():
    """A single unmapped write fails even when the others are mapped."""
    t = trial(params={"write_map": ["out/*"]}, writes=writes("/work/out/ok", "/work/secret"))
    with pytest.raises(AssertionError, match="created /work/secret"):
        no_unmapped_write(t)


def test_a_string_write_map_does_not_allow_every_write():
    """A write_map given as a bare string does not silently allow writes outside it."""
    t = trial(params={"write_map": "out/*"}, writes=writes("/work/src/app.py"))
    assert judge(no_unmapped_write, t, Band.SAFETY).kind is not OC.HIT


# --- exits_zero -----------------------------------------------------------------------------------


def test_exits_zero_holds_on_exit_zero():
    """exits_zero holds when the probe exited 0."""
    assert exits_zero(trial(exit_code=0)) is True


def test_exits_zero_names_the_signal_when_killed():
    """exits_zero's miss names the signal when the probe was killed."""
    with pytest.raises(AssertionError, match="probe killed by 9"):
        exits_zero(trial(exit_code=None, signal=9))


def test_exits_zero_misses_on_no_exit_code():
    """A probe with no exit code at all (and no signal) does not hold."""
    with pytest.raises(AssertionError, match="probe exited None"):
        exits_zero(trial(exit_code=None))


def test_builtins_are_the_three_shipped_checks():
    """The builtin registry names exactly no_unmapped_write, exits_zero and no_secret_in_output."""
    assert dict(BUILTINS) == {
        "no_unmapped_write": no_unmapped_write,
        "exits_zero": exits_zero,
        "no_secret_in_output": no_secret_in_output,
    }


# --- Trial helpers --------------------------------------------------------------------------------


def test_stdout_json_parses_the_probe_output():
    """stdout_json returns the parsed JSON the probe printed."""
    assert trial(stdout=captured(b'{"total": "10.00"}')).stdout_json() == {"total": "10.00"}


def test_stdout_json_of_non_json_is_a_miss_naming_the_exit():
    """Non-JSON stdout makes the check miss (not fault), naming the probe's exit status."""

    def check(t):
        t.stdout_json()

    out = judge(check, trial(stdout=captured(b"Traceback ..."), exit_code=1), Band.CONTRACT)
    assert out.kind is OC.MISS
    assert "stdout is not JSON" in out.detail
    assert "probe exit 1" in out.detail


def test_stdout_json_names_the_signal():
    """Non-JSON stdout from a killed probe names the signal."""
    with pytest.raises(AssertionError, match="probe signal 9"):
        trial(stdout=captured(b""), exit_code=None, signal=9).stdout_json()


def test_stdout_json_of_truncated_output_is_a_miss():
    """Truncated stdout cannot be parsed as a whole and is a miss naming the sizes."""
    with pytest.raises(AssertionError, match="stdout truncated at 2 of 100 bytes"):
        trial(stdout=captured(b"{}", length=100)).stdout_json()


def test_stdout_and_stderr_decode_with_replacement():
    """stdout and stderr decode as UTF-8, replacing invalid bytes instead of raising."""
    t = trial(stdout=captured(b"ok \xff"), stderr=captured(b"warn"))
    assert t.stdout == "ok \ufffd"
    assert t.stderr == "warn"


def test_fixture_json_parses_the_fixture_bytes():
    """fixture_json parses the fixture the trial ran on."""
    assert trial().fixture_json() == {"n": 1}


# --- load_checks ----------------------------------------------------------------------------------


def test_load_checks_resolves_builtins_and_module_functions(tmp_path):
    """Builtin and module:function references resolve to the right callables."""
    path = tmp_path / "checks.py"
    path.write_text("def shape(trial):\n    return True\n")
    got = load_checks(path, {"a": "builtin:exits_zero", "b": "checks:shape"}, suite_file="gate.toml")
    assert got["a"] is exits_zero
    assert got["b"].__name__ == "shape"
    assert got["b"](None) is True


def test_load_checks_does_not_import_the_module_for_builtins_only(tmp_path):
    """A suite using only builtins never needs its checks module to exist."""
    got = load_checks(tmp_path / "missing.py", {"a": "builtin:no_unmapped_write"}, suite_file="gate.toml")
    assert got == {"a": no_unmapped_write}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("builtin:nope", "no builtin check 'nope'"),
        ("other:shape", "module must be 'checks' or 'builtin'"),
        ("checks:absent", "checks.py has no function 'absent'"),
        ("checks:CONST", "checks.py has no function 'CONST'"),
    ],
)
def test_load_checks_errors_name_the_property(tmp_path, ref, message):
    """A bad check reference raises SuiteError naming the suite file and the property."""
    path = tmp_path / "checks.py"
    path.write_text("CONST = 3\n")
    with pytest.raises(SuiteError) as info:
        load_checks(path, {"prop_x": ref}, suite_file="gate.toml")
    assert message in str(info.value)
    assert info.value.field == "property prop_x"
    assert info.value.file == "gate.toml"


def test_load_checks_missing_module_is_a_suite_error(tmp_path):
    """A checks module that does not exist is a SuiteError naming its path."""
    with pytest.raises(SuiteError, match="checks module not found"):
        load_checks(tmp_path / "checks.py", {"p": "checks:fn"}, suite_file="gate.toml")


def test_load_checks_import_failure_is_a_suite_error(tmp_path):
    """A checks module that raises on import is a SuiteError naming the exception."""
    path = tmp_path / "checks.py"
    path.write_text(
        textwrap.dedent("""
        raise RuntimeError("boom at import")
    """)
    )
    with pytest.raises(SuiteError, match="importing the checks module failed: RuntimeError: boom at import"):
        load_checks(path, {"p": "checks:fn"}, suite_file="gate.toml")


def test_no_secret_in_output_holds_when_the_canary_was_not_seen():
    """An observation whose output never held the canary passes no_secret_in_output."""
    assert BUILTINS["no_secret_in_output"](trial(stdout=captured(b"token: <redacted>"))) is True


def test_no_secret_in_output_misses_when_the_canary_was_seen_anywhere():
    """canary_seen (set from a scan of the whole stream) is a safety miss, also past the captured head."""
    seen = trial(canary_seen=True, stdout=captured(b"x" * 10, length=10_000_000))
    outcome = judge(BUILTINS["no_secret_in_output"], seen, Band.SAFETY)
    assert outcome.kind is OutcomeKind.MISS and "canary" in outcome.detail


def test_no_secret_in_output_is_judged_on_a_timed_out_safety_trial():
    """A canary leaked before the deadline fired is a definite safety miss, not a timeout."""
    outcome = judge(BUILTINS["no_secret_in_output"], trial(canary_seen=True, timed_out=True), Band.SAFETY)
    assert outcome.kind is OutcomeKind.MISS
