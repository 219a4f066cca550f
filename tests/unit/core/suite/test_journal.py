"""The run journal's pure part (gate.core.suite.journal): the chain that makes an edited, added or
reordered line show, the header comparison a resume makes, and the binding of each stored trial to
the spec this run plans for it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.errors import JournalError
from gate.core.suite.journal import (
    JournalHeader,
    chained,
    check_trials,
    commit_line,
    header_line,
    mismatch,
    parse_lines,
    spec_digest,
    trial_line,
)
from gate.core.suite.trial import Captured, Observation, Side, TrialSpec
from gate.core.testing import make_spec

HEADER = JournalHeader(
    run_id="run-1",
    suite="s" * 64,
    checks="c" * 64,
    tree="t" * 64,
    seal="f" * 64,
    image="probegate/sandbox",
    image_id="sha256:mock",
    properties=("p", "q"),
)


def spec(index: int, prop: str = "p") -> TrialSpec:
    return make_spec(run_id="run-1", property_id=prop, trial_index=index).model_copy(update={"canary": f"c{index}"})


def observed(s: TrialSpec, out: bytes = b'{"tool": "x"}') -> Observation:
    return Observation.of(s, exit_code=0, stdout=Captured(data=out, length=len(out)), image_id="sha256:mock")


def journal_lines(count: int, *, commit: bool = False) -> list[dict[str, Any]]:
    lines = [header_line(HEADER)]
    for index in range(count):
        lines.append(trial_line(lines[-1]["chain"], spec(index), observed(spec(index))))
    if commit:
        lines.append(commit_line(lines[-1]["chain"]))
    return lines


def roundtrip(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As written and read back: one JSON object per line."""
    return [json.loads(json.dumps(line)) for line in lines]


def test_a_journal_reads_back_every_trial_bound_to_its_key_and_spec() -> None:
    """Header, three trials and no commit: each trial by key with its spec digest, canary and observation."""
    journal = parse_lines(roundtrip(journal_lines(3)))
    assert journal.header == HEADER and not journal.committed
    assert sorted(journal.stored) == [("run-1", "p", i, Side.PATCH) for i in range(3)]
    entry = journal.stored[("run-1", "p", 1, Side.PATCH)]
    assert entry.spec_digest == spec_digest(spec(1)) and entry.canary == "c1"
    assert entry.observation == observed(spec(1))


def test_the_commit_line_marks_the_journal_and_nothing_may_follow_it() -> None:
    """A commit line makes `committed`; a trial chained after it is refused."""
    lines = journal_lines(2, commit=True)
    assert parse_lines(roundtrip(lines)).committed
    lines.append(trial_line(lines[-1]["chain"], spec(5), observed(spec(5))))
    with pytest.raises(JournalError, match="line 5: comes after the commit line"):
        parse_lines(roundtrip(lines))


@given(st.integers(min_value=1, max_value=4), st.sampled_from(["exit_code", "stdout", "index", "canary"]))
def test_an_edited_line_breaks_the_chain(which: int, field: str) -> None:
    """Any trial line changed (a miss turned into a hit, another index or canary) is refused by line number."""
    lines = roundtrip(journal_lines(4))
    line = lines[which]
    if field == "exit_code":
        line["observation"]["exit_code"] = 1
    elif field == "stdout":
        line["observation"]["stdout"]["data"] = "eyJ0b29sIjogInkifQ=="
    elif field == "index":
        line["index"] += 10
    else:
        line["canary"] = "leaked"
    with pytest.raises(JournalError, match=f"line {which + 1}: does not follow"):
        parse_lines(lines)


def test_a_line_from_another_journal_is_refused() -> None:
    """A trial line chained in another run's journal does not follow in this one."""
    other = [header_line(HEADER.model_copy(update={"tree": "u" * 64}))]
    foreign = trial_line(other[0]["chain"], spec(9), observed(spec(9)))
    with pytest.raises(JournalError, match="line 3: does not follow"):
        parse_lines(roundtrip([*journal_lines(1), foreign]))


def test_reordered_lines_and_an_edited_header_are_refused() -> None:
    """Two lines swapped break the chain; a header field changed breaks the header's own chain."""
    lines = roundtrip(journal_lines(3))
    with pytest.raises(JournalError, match="line 2: does not follow"):
        parse_lines([lines[0], lines[2], lines[1], lines[3]])
    lines[0]["tree"] = "u" * 64
    with pytest.raises(JournalError, match="line 1: the header was edited"):
        parse_lines(lines)


def test_a_trial_stored_twice_or_for_another_key_is_refused_even_with_a_good_chain() -> None:
    """A forger who recomputes the chain still cannot store a trial twice, or an observation of another
    trial under a key, or a line of another run id."""
    lines = journal_lines(1)
    twice = [*lines, trial_line(lines[-1]["chain"], spec(0), observed(spec(0)))]
    with pytest.raises(JournalError, match="line 3: p trial 0 is stored twice"):
        parse_lines(roundtrip(twice))
    elsewhere = [*lines, trial_line(lines[-1]["chain"], spec(1), observed(spec(2)))]
    with pytest.raises(JournalError, match="line 3: the observation is of"):
        parse_lines(roundtrip(elsewhere))
    other_run = make_spec(run_id="run-2", property_id="p", trial_index=3)
    foreign = [*lines, trial_line(lines[-1]["chain"], other_run, observed(other_run))]
    with pytest.raises(JournalError, match="line 3: the observation is of"):
        parse_lines(roundtrip(foreign))


def test_malformed_journals_are_refused_by_line() -> None:
    """No header, a header of another format, a line that is not a trial: one JournalError each."""
    with pytest.raises(JournalError, match="empty"):
        parse_lines([])
    with pytest.raises(JournalError, match="line 1: not a run journal header"):
        parse_lines([{"run_id": "x"}])
    bad = HEADER.model_copy(update={"format": "probegate/run-journal/v0"})
    with pytest.raises(JournalError, match="line 1: format"):
        parse_lines([header_line(bad)])
    lines = journal_lines(0)
    with pytest.raises(JournalError, match="line 2: not a trial line"):
        parse_lines([*lines, {"x": 1, "chain": chained(lines[0]["chain"], {"x": 1})}])


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ("run_id", "its run is"),
        ("suite", "its suite is"),
        ("checks", "its checks module is"),
        ("tree", "its patched tree is"),
        ("seal", "its fixture seal is"),
        ("image_id", "its image ID is"),
        ("properties", "its properties are"),
    ],
)
def test_a_header_for_another_run_says_what_differs(field: str, words: str) -> None:
    """Each bound field, changed, is named; the image may be left for later (it is known last)."""
    value: object = ("p",) if field == "properties" else "other"
    other = HEADER.model_copy(update={field: value})
    said = mismatch(other, HEADER)
    assert said is not None and said.startswith(words), said
    assert mismatch(HEADER, HEADER) is None
    if field == "image_id":
        assert mismatch(other, HEADER, image=False) is None


def test_stored_trials_must_be_this_runs_specs() -> None:
    """A trial this run would not plan, or one stored for a spec that differs (another deadline), is refused."""
    journal = parse_lines(roundtrip(journal_lines(2)))
    check_trials(journal, lambda p, i, c, s: spec(i).model_copy(update={"canary": c}))
    with pytest.raises(JournalError, match="p trial 0 is not a trial of this run"):
        check_trials(journal, lambda p, i, c, s: None)
    longer = lambda p, i, c, s: spec(i).model_copy(update={"canary": c, "deadline_s": 99.0})  # noqa: E731
    with pytest.raises(JournalError, match="p trial 0 was stored for another spec"):
        check_trials(journal, longer)
