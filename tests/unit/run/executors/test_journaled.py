"""Durable runs over a MockExecutor: a run stopped halfway leaves its journal in the state folder and no
books or card; `--resume` reuses the stored trials, runs the rest and writes the card an uninterrupted
run writes, once; a journal that is not this run's is refused (exit 65) before any trial runs."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from support.judging import in_process
from support.mini_suite import CONTRACT, NOW, RUN_ID, SAFETY, STAT, Handler, Suite, build_suite, good, stdout

from gate.cli.refold import run_refold
from gate.core.errors import JournalError, UsageError
from gate.core.suite.journal import chained
from gate.core.suite.sandbox import Inputs
from gate.core.suite.trial import FaultOrigin, Observation, TrialSpec
from gate.core.verdicts.bands import SprtRule
from gate.io.journal import STATE_ENV, journal_path, read_journal
from gate.io.liveprogress import progress_path, read_progress
from gate.run.executors.mock import MockExecutor
from gate.run.request import RunResult
from gate.run.runner import run_gate

SPRT = 'rule = "sprt"\np0 = 0.8\np1 = 0.6\nalpha = 0.05\nbeta = 0.05\nmax_trials = 60\nwave = 5\n'


class Killed(Exception):
    """Stands for the coordinator dying: nothing after it runs."""


class Dying(MockExecutor):
    """A MockExecutor that dies after yielding `after` observations in all."""

    def __init__(self, handler: Handler, after: int) -> None:
        super().__init__(handler)
        self.left = after

    def run(self, specs: Sequence[TrialSpec], inputs: Inputs) -> Iterator[Observation]:
        for obs in super().run(specs, inputs):
            if self.left == 0:
                raise Killed
            self.left -= 1
            yield obs


class Counting(MockExecutor):
    """A MockExecutor that counts the trials it ran."""

    ran = 0

    def run(self, specs: Sequence[TrialSpec], inputs: Inputs) -> Iterator[Observation]:
        self.ran += len(specs)
        yield from super().run(specs, inputs)


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return with_trials(build_suite(tmp_path), "trials = 30\nmin_hits = 24\n")


def fresh_suite(folder: Path) -> Suite:
    folder.mkdir(parents=True)
    return build_suite(folder)


def with_trials(suite: Suite, rule: str) -> Suite:
    """The mini suite with its statistical property under `rule`."""
    path = suite.request.suite
    path.write_text(path.read_text() + rule)
    return suite


def sometimes(spec: TrialSpec, fixture: bytes) -> Observation:
    """`good`, but the statistical property misses on every seventh trial (deterministic by index)."""
    obs = good(spec, fixture)
    if spec.property_id == STAT and spec.trial_index % 7 == 3:
        return obs.model_copy(update={"stdout": stdout({"tool": "search"})})
    return obs


def run_with(suite: Suite, executor: MockExecutor, notes: list[str], *, resume: bool = False) -> RunResult:
    request = replace(suite.request, resume=resume, new_ledger=not suite.ledger.exists())
    return run_gate(
        request,
        executor_factory=lambda _: executor,
        judge_factory=in_process,  # the check process is tests/unit/io/test_checkproc.py's
        now=lambda: NOW,
        run_id=RUN_ID,
        emit=len,
        note=notes.append,
    )


def interrupted(suite: Suite, after: int, handler: Handler = sometimes) -> Path:
    """A run that dies after `after` observations: its journal is left, no card, no books."""
    with pytest.raises(Killed):
        run_with(suite, Dying(handler, after), [])
    assert not suite.card.exists() and not suite.ledger.exists()
    return journal_path(suite.card, suite.request.state_dir)


def rows(result: RunResult) -> list[tuple[str, str, int, int]]:
    return [(r.id, r.kind, r.hits, r.trials) for r in result.card.properties]


def uninterrupted(tmp_path: Path, rule: str, handler: Handler = sometimes) -> RunResult:
    other = with_trials(fresh_suite(tmp_path / "whole"), rule)
    return run_with(other, MockExecutor(handler), [])


def books(suite: Suite) -> dict:
    return json.loads(suite.ledger.read_text())


def test_a_resumed_run_reuses_what_was_stored_and_writes_the_uninterrupted_card(suite: Suite, tmp_path: Path) -> None:
    """Killed after 20 of 32 trials, resumed: 20 reused, 12 run, the rows of an uninterrupted run, the run
    id kept, the books written once and the journal gone."""
    journal = interrupted(suite, after=20)
    assert len(journal.read_text().splitlines()) == 21  # the header and one line per observed trial
    # Beside it, what `gate view` shows of the checks' judging so far: counts, planned trials first.
    progress = read_progress(progress_path(journal))
    assert {pid: c.planned for pid, c in progress.items()} == {SAFETY: 1, CONTRACT: 1, STAT: 30}
    assert sum(c.judged for c in progress.values()) <= 20
    notes: list[str] = []
    executor = Counting(sometimes)
    resumed = run_with(suite, executor, notes, resume=True)
    whole = uninterrupted(tmp_path, "trials = 30\nmin_hits = 24\n")
    assert rows(resumed) == rows(whole) and executor.ran == 12
    assert notes == [f"gate: resumed run {RUN_ID}: 20 trial(s) reused, 12 re-run"]
    assert resumed.card.run_id == RUN_ID
    assert any(e.kind == "resumed" for e in resumed.card.harness_events)
    assert not journal.exists() and not progress_path(journal).exists()
    assert run_refold(suite.card) == 0  # the evidence beside it (reused and new trials) re-folds to its rows
    assert (
        books(suite)["sampler_window"]
        == json.loads((tmp_path / "whole" / "out" / "ledger.json").read_text())["sampler_window"]
    )


def test_a_resumed_sequential_run_makes_the_same_wave_decisions(tmp_path: Path) -> None:
    """An SPRT property killed mid-wave and resumed dispatches exactly the trials an uninterrupted run does."""
    suite = with_trials(fresh_suite(tmp_path / "cut"), SPRT)
    interrupted(suite, after=9)  # two fixed trials, then the SPRT's first wave and two of its second
    executor = Counting(sometimes)
    resumed = run_with(suite, executor, [], resume=True)
    whole = uninterrupted(tmp_path, SPRT)
    assert rows(resumed) == rows(whole)
    stat = next(r for r in whole.card.properties if r.id == STAT)
    assert stat.trials > 10 and executor.ran == stat.trials + 2 - 9


def test_the_progress_file_carries_the_suites_sprt_rule_for_the_view(tmp_path: Path) -> None:
    """Killed in its third wave, an SPRT run's progress file holds the suite's rule for that property alone, and
    one outcome per judged trial in index order, agreeing with its counts."""
    suite = with_trials(fresh_suite(tmp_path / "cut"), SPRT)
    journal = interrupted(suite, after=14)  # two fixed trials, two waves of five, two of the third
    progress = read_progress(progress_path(journal))
    stat = progress[STAT]
    assert stat.sprt == SprtRule(p0=0.8, p1=0.6, alpha=0.05, beta=0.05, max_trials=60, wave=5)
    assert stat.planned == 15 and stat.judged >= 10
    assert stat.outcomes[:10] == "hhhmhhhhhh"  # `sometimes` misses trial 3 of every 7
    assert all(progress[pid].sprt is None and progress[pid].outcomes == "" for pid in (SAFETY, CONTRACT))


def test_a_run_killed_twice_resumes_twice(suite: Suite, tmp_path: Path) -> None:
    """A resume that dies too leaves a journal the next resume continues."""
    interrupted(suite, after=10)
    with pytest.raises(Killed):
        run_with(suite, Dying(sometimes, 5), [], resume=True)
    notes: list[str] = []
    resumed = run_with(suite, Counting(sometimes), notes, resume=True)
    assert notes == [f"gate: resumed run {RUN_ID}: 15 trial(s) reused, 17 re-run"]
    assert rows(resumed) == rows(uninterrupted(tmp_path, "trials = 30\nmin_hits = 24\n"))


def test_a_torn_last_line_is_dropped_and_its_trial_runs_again(suite: Suite) -> None:
    """The line being written at the kill (no newline yet) is cut off; its trial is not reused."""
    journal = interrupted(suite, after=6)
    data = journal.read_bytes()
    journal.write_bytes(data[: data.rfind(b"\n", 0, len(data) - 1) + 1] + data.splitlines(keepends=True)[-1][:40])
    notes: list[str] = []
    run_with(suite, Counting(sometimes), notes, resume=True)
    assert notes == [f"gate: resumed run {RUN_ID}: 5 trial(s) reused, 27 re-run"]


def refused(suite: Suite, match: str) -> None:
    """`--resume` refuses with one JournalError line naming the journal; nothing runs, nothing is written."""
    executor = Counting(sometimes)
    before = journal_path(suite.card, suite.request.state_dir).read_bytes()
    with pytest.raises(JournalError, match=match) as caught:
        run_with(suite, executor, [], resume=True)
    assert caught.value.exit_code == 65 and caught.value.file == str(journal_path(suite.card, suite.request.state_dir))
    assert "\n" not in str(caught.value)
    assert executor.ran == 0 and not suite.card.exists() and not suite.ledger.exists()
    assert journal_path(suite.card, suite.request.state_dir).read_bytes() == before


def edit_line(path: Path, number: int, edit: dict) -> None:
    lines = path.read_text().splitlines()
    line = json.loads(lines[number - 1])
    for key, value in edit.items():
        target = line
        *parents, last = key.split(".")
        for part in parents:
            target = target[part]
        target[last] = value
    lines[number - 1] = json.dumps(line)
    path.write_text("\n".join(lines) + "\n")


def test_a_line_edited_to_claim_a_hit_is_refused(suite: Suite) -> None:
    """A stored miss of the statistical property turned into a hit breaks the journal's chain."""
    journal = interrupted(suite, after=10)
    miss = next(
        n
        for n, text in enumerate(journal.read_text().splitlines(), start=1)
        if '"property":"tool_choice_rate"' in text and '"index":3,' in text
    )
    hit = stdout({"tool": "refunds.lookup"}).model_dump(mode="json")
    edit_line(journal, miss, {"observation.stdout": hit})
    refused(suite, f"line {miss}: does not follow from the lines before it")


def test_a_foreign_line_added_is_refused(suite: Suite) -> None:
    """A line added at the end, even one chained properly, for a trial this run never plans, is refused."""
    journal = interrupted(suite, after=4)
    last = json.loads(journal.read_text().splitlines()[-1])
    body = json.loads(json.dumps({k: v for k, v in last.items() if k != "chain"}))
    body["index"] = body["observation"]["trial_index"] = 999
    journal.write_text(journal.read_text() + json.dumps({**body, "chain": chained(last["chain"], body)}) + "\n")
    refused(suite, "trial 999 is not a trial of this run")
    with journal.open("a") as handle:
        handle.write('{"not": "chained"}\n')
    refused(suite, "line 7: does not follow")


def test_a_journal_of_another_tree_is_refused(suite: Suite) -> None:
    """The patched tree changed since the run was interrupted: the journal is not this run's."""
    interrupted(suite, after=4)
    (suite.request.workdir / "probe.py").write_text("print('{\"tool\": 1}')\n")
    refused(suite, "not this run's journal: its patched tree is")


def test_a_journal_of_another_image_is_refused(suite: Suite) -> None:
    """Resumed where the sandbox image resolves to another ID: refused before any trial runs."""
    interrupted(suite, after=4)
    executor = Counting(sometimes, image_id="sha256:other")
    with pytest.raises(JournalError, match="its image ID is 'sha256:mock'"):
        run_with(suite, executor, [], resume=True)
    assert executor.ran == 0 and not suite.card.exists()


def test_a_journal_whose_header_names_another_tree_is_refused(suite: Suite) -> None:
    """A header rewritten for another tree is refused as an edit; with the whole chain redone (so only
    the binding can catch it), as a journal of another tree."""
    journal = interrupted(suite, after=4)
    lines = [json.loads(text) for text in journal.read_text().splitlines()]
    lines[0]["tree"] = "0" * 64
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refused(suite, "line 1: the header was edited")
    chain = ""
    for line in lines:  # the whole journal chained again, as a forger with the file would
        body = {k: v for k, v in line.items() if k != "chain"}
        line["chain"] = chain = chained(chain, body)
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refused(suite, "its patched tree is '0000000000000000…'")


def test_a_journal_that_reached_its_commit_is_refused(suite: Suite) -> None:
    """Killed after the commit line (the books may be written): a resume is refused, never committed twice."""
    journal = interrupted(suite, after=4)
    found = read_journal(journal)
    assert found is not None
    found[1].commit()
    found[1].close()
    refused(suite, "reached its commit")


def test_a_journal_held_by_a_live_run_is_refused(suite: Suite) -> None:
    """Another coordinator is still writing the journal (it holds the lock): no second run on it."""
    journal = interrupted(suite, after=4)
    found = read_journal(journal)
    assert found is not None
    try:
        refused(suite, "another gate run is writing this journal now")
    finally:
        found[1].close()


def test_without_resume_a_stale_journal_is_replaced_and_with_no_journal_resume_runs_everything(
    suite: Suite,
) -> None:
    """A plain run replaces an interrupted run's journal (said on stderr); `--resume` with none runs all."""
    interrupted(suite, after=4)
    notes: list[str] = []
    executor = Counting(sometimes)
    run_with(suite, executor, notes)
    assert executor.ran == 32 and "removed the journal of an interrupted run" in notes[0]
    assert not journal_path(suite.card, suite.request.state_dir).exists()
    notes.clear()
    again = Counting(sometimes)
    result = run_with(suite, again, notes, resume=True)
    assert again.ran == 32 and "nothing to resume" in notes[0] and result.card.run_id == RUN_ID
    assert not any(e.kind == "resumed" for e in result.card.harness_events)


def harness_fault(spec: TrialSpec, fixture: bytes) -> Observation:
    """The contract trial could not be observed, provably outside the patch: a harness credit is drawn."""
    if spec.property_id == CONTRACT:
        return Observation.harness_fault(spec, "engine gone", origin=FaultOrigin.HARNESS)
    return sometimes(spec, fixture)


def test_a_resumed_run_draws_a_harness_credit_once(suite: Suite, tmp_path: Path) -> None:
    """A harness fault stored before the kill draws one credit at the resumed run's commit, as in an
    uninterrupted run: the killed run committed nothing, the resume commits once."""
    interrupted(suite, after=10, handler=harness_fault)
    resumed = run_with(suite, Counting(harness_fault), [], resume=True)
    whole = uninterrupted(tmp_path, "trials = 30\nmin_hits = 24\n", handler=harness_fault)
    assert rows(resumed) == rows(whole) and resumed.card.properties[1].kind == "harness_error"
    credit = books(suite)["credits"][CONTRACT]
    assert credit == json.loads((tmp_path / "whole" / "out" / "ledger.json").read_text())["credits"][CONTRACT]
    assert credit["remaining"] == 1  # the budget of 2, drawn once


def test_a_fresh_run_does_not_take_a_live_runs_journal(suite: Suite) -> None:
    """Without --resume, a journal another coordinator is still writing is refused, not removed."""
    journal = interrupted(suite, after=4)
    found = read_journal(journal)
    assert found is not None
    try:
        with pytest.raises(JournalError, match="another gate run is writing this journal now"):
            run_with(suite, Counting(sometimes), [])
        assert journal.exists()
    finally:
        found[1].close()


def test_a_journal_planted_beside_the_card_or_in_the_tree_is_never_read(suite: Suite) -> None:
    """A journal where a patch could put one (beside a card, in the patched tree) is not the run's: a
    resume finds none there and runs every trial, whatever that file claims."""
    journal = interrupted(suite, after=20, handler=good)  # every stored trial a hit
    assert not journal.is_relative_to(suite.card.parent) and not journal.is_relative_to(suite.request.workdir)
    for planted in (suite.card.with_name(suite.card.name + ".journal"), suite.request.workdir / "card.json.journal"):
        planted.parent.mkdir(exist_ok=True)
        planted.write_bytes(journal.read_bytes())
    journal.unlink()
    notes: list[str] = []
    executor = Counting(sometimes)
    result = run_with(suite, executor, notes, resume=True)
    assert executor.ran == 32 and "nothing to resume" in notes[0]
    assert result.card.properties[2].hits == 30 - 4  # the misses of `sometimes`, not the planted hits


@pytest.mark.parametrize("where", ["tree", "repository"])
def test_a_state_folder_inside_the_patched_repository_is_refused(suite: Suite, where: str) -> None:
    """PROBEGATE_STATE_DIR inside the patched tree, or in the git repository holding it, is refused in one
    line (exit 64) before any trial: a patch could have placed a journal there."""
    work = suite.request.workdir
    if where == "repository":
        (work.parent / ".git").mkdir()  # the patched tree is a folder of a repository
        state = work.parent / "state"
    else:
        state = work / ".state"
    executor = Counting(sometimes)
    with pytest.raises(UsageError, match="inside the patched tree's repository") as caught:
        run_with(replace(suite, request=replace(suite.request, state_dir=state)), executor, [], resume=True)
    assert caught.value.exit_code == 64 and caught.value.field == STATE_ENV and "\n" not in str(caught.value)
    assert executor.ran == 0 and not suite.card.exists() and not state.exists()
