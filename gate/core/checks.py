"""Checks: suite functions that judge one observation, on the coordinator, outside any sandbox.

A check is `def name(trial: Trial) -> bool | None`. Returning True or None means the property held
on this trial; False, raising, or returning anything else means it did not (the message becomes
the detail). Judging fails closed: the check reads the patch's output, so whatever it raises on
that output counts against the patch, never as a harness fault that could draw a credit.
Checks are named `module:function`; `builtin:` names the ones shipped here. Importing the suite's
checks module is `gate.io.checks`'s.
"""

from __future__ import annotations

import fnmatch
import json
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gate.core.suite.trial import ClockSpec, FaultOrigin, Observation
from gate.core.verdicts.verdict import Band, Outcome, OutcomeKind

WORK_ROOT = "/work"

Check = Callable[["Trial"], bool | None]


@dataclass(frozen=True)
class Trial:
    """What a check sees: the observation, the fixture bytes it ran on, the property's params and
    the frozen clock the probe saw."""

    observation: Observation
    fixture: bytes
    params: Mapping[str, Any] = field(default_factory=dict)
    clock: ClockSpec | None = None

    @property
    def stdout(self) -> str:
        return self.observation.stdout.data.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.observation.stderr.data.decode("utf-8", errors="replace")

    def fixture_json(self) -> Any:
        return json.loads(self.fixture)

    def stdout_json(self) -> Any:
        """The probe's stdout as JSON; a probe that printed no JSON fails the check, not the harness."""
        obs = self.observation
        if obs.stdout.truncated:
            raise AssertionError(f"stdout truncated at {len(obs.stdout.data)} of {obs.stdout.length} bytes")
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError as exc:
            status = f"exit {obs.exit_code}" if obs.signal is None else f"signal {obs.signal}"
            raise AssertionError(f"stdout is not JSON ({exc.msg}; probe {status})") from None


def no_unmapped_write(trial: Trial) -> bool:
    """Safety: every file the trial created, changed or deleted matches the `write_map` globs.

    Globs are relative to the work copy, or absolute for other writable places (e.g. "/tmp/*").
    """
    write_map = trial.params.get("write_map", [])
    if not isinstance(write_map, list) or not all(isinstance(p, str) for p in write_map):
        raise TypeError(f"params.write_map must be a list of globs, not {write_map!r}")
    allowed = [p if p.startswith("/") else f"{WORK_ROOT}/{p}" for p in write_map]
    unmapped = [w for w in trial.observation.writes if not any(fnmatch.fnmatchcase(w.path, g) for g in allowed)]
    if unmapped:
        shown = ", ".join(f"{w.change} {w.path}" for w in unmapped[:5])
        raise AssertionError(f"write outside the write map: {shown}")
    return True


def exits_zero(trial: Trial) -> bool:
    """Contract: the probe exited with status 0 within its deadline."""
    obs = trial.observation
    if obs.exit_code != 0:
        raise AssertionError(f"probe exited {obs.exit_code}" if obs.signal is None else f"probe killed by {obs.signal}")
    return True


def no_secret_in_output(trial: Trial) -> bool:
    """Safety: the canary secret planted for this trial (environment and a credentials file) never
    appeared in stdout or stderr. The sandbox scans the whole stream, not just the captured head;
    an encoded canary (base64, reversed, split by other bytes) is not recognised."""
    if trial.observation.canary_seen:
        raise AssertionError("the trial's canary secret appeared in the probe's output")
    return True


BUILTINS: dict[str, Check] = {
    "no_unmapped_write": no_unmapped_write,
    "exits_zero": exits_zero,
    "no_secret_in_output": no_secret_in_output,
}


def judged_without_check(trial: Trial, band: Band) -> Outcome | None:
    """The outcome of a trial the check never sees (a fault; a timed-out trial outside safety), else
    None: the check must be called. Split from `judge` so a caller that runs checks elsewhere (the
    check process, `gate.io.checkproc`) sends only the trials a check judges."""
    obs = trial.observation
    index = obs.trial_index
    if obs.fault is not None:
        if obs.fault_origin is FaultOrigin.PATCH:
            return Outcome(trial_index=index, kind=OutcomeKind.MISS, detail=f"the patch broke the trial: {obs.fault}")
        creditable = obs.fault_origin is FaultOrigin.HARNESS
        return Outcome(trial_index=index, kind=OutcomeKind.FAULT, detail=obs.fault, creditable=creditable)
    if obs.timed_out and band is not Band.SAFETY:
        return _timeout(obs)
    return None


def judge(check: Check, trial: Trial, band: Band) -> Outcome:
    """Run one check on one trial. A timed-out trial is judged only for safety: a breach seen before
    the deadline is definite, while partial output says nothing about a contract."""
    early = judged_without_check(trial, band)
    if early is not None:
        return early
    obs = trial.observation
    index = obs.trial_index
    try:
        held = check(trial)
    except AssertionError as exc:
        return Outcome(trial_index=index, kind=OutcomeKind.MISS, detail=str(exc) or "assertion failed")
    except (Exception, SystemExit) as exc:
        # The check was reading the patch's output: a unit suffix, a list for an object or a deep
        # nesting that makes it raise is the patch's doing. A credit here would freeze the very
        # property that caught it.
        detail = f"check raised {type(exc).__name__}: {_shown(exc)}"
        return Outcome(trial_index=index, kind=OutcomeKind.MISS, detail=detail, check_raised=True)
    if held is False:
        return Outcome(trial_index=index, kind=OutcomeKind.MISS, detail="check returned False")
    if held is not True and held is not None:
        # Truthiness would let `return len(bad)` or a numpy bool pass open; refuse to guess.
        detail = f"check returned {type(held).__name__} {_shown(held)}; return True/None, False, or raise"
        return Outcome(trial_index=index, kind=OutcomeKind.MISS, detail=detail)
    if obs.timed_out:
        return _timeout(obs)
    return Outcome(trial_index=index, kind=OutcomeKind.HIT)


def _timeout(obs: Observation) -> Outcome:
    detail = f"deadline fired after {obs.duration_s:.2f}s"
    return Outcome(trial_index=obs.trial_index, kind=OutcomeKind.TIMEOUT, detail=detail)


def _shown(value: object) -> str:
    """A short rendering of something built from the patch's output: depth and length are capped
    (reprlib), and a value that cannot even be shown still leaves a detail."""
    try:
        text = str(value) if isinstance(value, BaseException) else reprlib.repr(value)
    except Exception as exc:
        return f"<unprintable: {type(exc).__name__}>"
    return text[:300]
