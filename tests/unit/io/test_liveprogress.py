"""A run's judged progress file (gate.io.liveprogress): counts by property (and an SPRT property's rule and
outcomes), rewritten at most every so often and always at the end, read back as written or as nothing when it
is missing or garbled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.core.suite.trial import Side
from gate.core.verdicts.bands import SprtRule
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import OutcomeKind
from gate.io.liveprogress import Judged, ProgressFile, progress_path, read_progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_counts_are_written_at_most_every_so_often_and_whole_at_the_end(tmp_path: Path) -> None:
    """Planned, judged and hits per property; a plan and the end are written at once, judged trials at most
    once a second."""
    path = progress_path(tmp_path / "card.json-0123.journal")
    clock = Clock()
    progress = ProgressFile(path, every_s=1.0, clock=clock)
    progress.planned("p", 10)
    progress.planned("q", 5)  # a plan is written at once, however soon after the last write
    assert read_progress(path) == {"p": Judged(planned=10), "q": Judged(planned=5)}
    progress.done("p", OutcomeKind.HIT, 0)
    progress.done("p", OutcomeKind.MISS, 1)
    assert read_progress(path)["p"].judged == 0  # within the second: not rewritten yet
    clock.now = 1.5
    progress.done("p", OutcomeKind.FAULT, 2)
    assert read_progress(path)["p"] == Judged(planned=10, judged=3, hits=1)
    progress.done("q", OutcomeKind.HIT, 0)
    progress.finished()
    assert read_progress(path) == {"p": Judged(planned=10, judged=3, hits=1), "q": Judged(planned=5, judged=1, hits=1)}
    assert path.name == "card.json-0123.journal.progress"


@pytest.mark.parametrize(
    "text", ["", "not json", "[]", '{"properties": 3}', '{"properties": {"p": {"planned": "x"}}}', '{"other": 1}']
)
def test_a_missing_or_garbled_file_reads_as_nothing(tmp_path: Path, text: str) -> None:
    """Whatever is at the path, reading it never raises: no counts instead."""
    path = tmp_path / "x.progress"
    assert read_progress(path) == {}
    path.write_text(text)
    assert read_progress(path) == {}


def test_a_folder_that_cannot_be_written_costs_the_run_nothing(tmp_path: Path) -> None:
    """The file is the view's copy: a write that fails is dropped, the run's own calls never raise."""
    (tmp_path / "blocked").write_text("a file where the folder would be")
    progress = ProgressFile(tmp_path / "blocked" / "x.progress")
    progress.planned("p", 1)
    progress.done("p", OutcomeKind.HIT, 0)
    progress.finished()


def test_a_fifo_where_the_file_should_be_never_blocks_the_reader(tmp_path: Path) -> None:
    """Something planted at the path that is no regular file reads as nothing, at once."""
    import os

    path = tmp_path / "x.progress"
    os.mkfifo(path)
    assert read_progress(path) == {}


RULE = SprtRule(p0=0.8, p1=0.6, max_trials=20, wave=5)


def test_an_sprt_property_keeps_its_rule_and_each_trials_outcome_by_index(tmp_path: Path) -> None:
    """A property the run judges by an SPRT carries its rule and one letter per trial index, whatever order the
    trials were judged in; a property without one carries neither."""
    path = tmp_path / "x.progress"
    progress = ProgressFile(path, sprt={"s": RULE}, every_s=0)
    progress.planned("s", 5)
    progress.planned("p", 10)
    for index, kind in ((2, OutcomeKind.MISS), (0, OutcomeKind.HIT), (3, OutcomeKind.TIMEOUT)):
        progress.done("s", kind, index)
    progress.done("p", OutcomeKind.HIT, 0)
    read = read_progress(path)
    assert read["s"] == Judged(planned=5, judged=3, hits=1, sprt=RULE, outcomes="h.mt")
    assert read["s"].judged_kinds() == [OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.TIMEOUT]
    assert read["p"] == Judged(planned=10, judged=1, hits=1)


@pytest.mark.parametrize(
    "fields",
    [
        {"sprt": {**RULE.model_dump(mode="json"), "p1": 0.9}, "outcomes": "h"},  # p1 above p0: no rule
        {"sprt": "sprt", "outcomes": "h"},
        {"sprt": RULE.model_dump(mode="json"), "outcomes": "hx"},  # a letter that is no outcome
        {"sprt": RULE.model_dump(mode="json"), "outcomes": "h" * 21},  # past the rule's max_trials
        {"sprt": RULE.model_dump(mode="json"), "outcomes": "hh"},  # two hits where the counts say one
        {"sprt": RULE.model_dump(mode="json"), "outcomes": ["h"]},
        {"sprt": RULE.model_dump(mode="json")},  # a rule without outcomes
    ],
)
def test_sprt_fields_that_do_not_add_up_read_as_nothing(tmp_path: Path, fields: dict) -> None:
    """An SPRT rule or outcomes that do not parse, or disagree with the counts or the cap: the whole file is
    garbled and reads as nothing, never raises."""
    path = tmp_path / "x.progress"
    path.write_text(json.dumps({"properties": {"s": {"planned": 5, "judged": 1, "hits": 1, **fields}}}))
    assert read_progress(path) == {}


PAIRED = PairedRule(margin=0.2, max_pairs=20, wave=5)


def test_a_paired_property_keeps_its_rule_and_both_trees_outcomes_by_index(tmp_path: Path) -> None:
    """A property the run judges by the paired rule carries its rule and one letter per trial index for each
    tree; its counts take both trees' trials, as the run plans them."""
    path = tmp_path / "x.progress"
    progress = ProgressFile(path, paired={"q": PAIRED}, every_s=0)
    progress.planned("q", 4)
    progress.done("q", OutcomeKind.HIT, 1, Side.BASE)
    progress.done("q", OutcomeKind.MISS, 1)
    progress.done("q", OutcomeKind.HIT, 0, Side.BASE)
    read = read_progress(path)["q"]
    assert read == Judged(planned=4, judged=3, hits=2, paired=PAIRED, outcomes=".m", base_outcomes="hh")
    assert read.by_index(Side.BASE) == [(0, OutcomeKind.HIT), (1, OutcomeKind.HIT)]
    assert read.by_index(Side.PATCH) == [(1, OutcomeKind.MISS)]


@pytest.mark.parametrize(
    "fields",
    [
        {"paired": PAIRED.model_dump(mode="json"), "outcomes": "h", "base_outcomes": "h"},  # two judged, one said
        {"paired": PAIRED.model_dump(mode="json"), "outcomes": "h"},  # no base outcomes
        {"paired": PAIRED.model_dump(mode="json"), "outcomes": "", "base_outcomes": "." * 21 + "h"},  # past the cap
        {"paired": {"margin": 2}, "outcomes": "h", "base_outcomes": ""},  # no rule
        {"paired": PAIRED.model_dump(mode="json"), "sprt": RULE.model_dump(mode="json"), "outcomes": "h",
         "base_outcomes": ""},  # two rules at once
    ],
)  # fmt: skip
def test_paired_fields_that_do_not_add_up_read_as_nothing(tmp_path: Path, fields: dict) -> None:
    """A paired rule or outcomes that do not parse, disagree with the counts or the cap, or come beside an
    SPRT rule: the whole file reads as nothing."""
    path = tmp_path / "x.progress"
    path.write_text(json.dumps({"properties": {"q": {"planned": 5, "judged": 1, "hits": 1, **fields}}}))
    assert read_progress(path) == {}
