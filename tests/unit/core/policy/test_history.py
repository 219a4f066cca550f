"""gate.core.policy.history: the bounded per-property flake history, the nightly pair's flakes and the
lifting rule, and the history carried in the ledger file beside the credits."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gate.core.errors import ConfigError
from gate.core.policy.freezes import FreezeEntry, FreezeFile, created
from gate.core.policy.history import (
    History,
    HistoryEntry,
    base_run_refusal,
    bounded,
    consecutive_passes,
    lift_due,
    pair_flakes,
    record,
    runs_needed,
)
from gate.core.policy.ledger import Ledger
from gate.core.suite.suite import LedgerConfig, SamplerConfig
from gate.core.verdicts.bands import SamplerWindow
from gate.core.verdicts.verdict import Kind
from gate.io.ledgerfile import FileBooks

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
SEAL = "a" * 64
OTHER_SEAL = "b" * 64
TERMS = (LedgerConfig(), SamplerConfig())


def entry(
    run: int, kind: Kind = Kind.PASS, *, seal: str = SEAL, commit: str = "c0ffee", image: str = "sha256:i"
) -> HistoryEntry:
    return HistoryEntry(
        run_id=f"run-{run}",
        at=T0 + timedelta(hours=run),
        seal=seal,
        commit=commit,
        image_id=image,
        kind=kind,
        trials=4,
        hits=4 if kind is Kind.PASS else 2,
    )


def keep(ledger: Ledger, window: SamplerWindow) -> tuple[None, Ledger, SamplerWindow]:
    return None, ledger, window


def test_record_appends_per_property_and_keeps_only_the_last_n() -> None:
    """Recording past the limit drops the oldest entries of that property only."""
    history = History()
    for run in range(7):
        history = record(history, {"p": entry(run)}, limit=5)
    history = record(history, {"q": entry(9)}, limit=5)
    assert [e.run_id for e in history.of("p")] == [f"run-{r}" for r in range(2, 7)]
    assert [e.run_id for e in history.of("q")] == ["run-9"]
    assert history.of("absent") == ()


def test_recording_the_same_run_twice_records_it_once() -> None:
    """A retried transaction that records a run id again replaces, never duplicates, its entry."""
    history = record(record(History(), {"p": entry(1)}), {"p": entry(1, Kind.FAIL_CONTRACT)})
    assert [e.kind for e in history.of("p")] == [Kind.FAIL_CONTRACT]


def test_bounded_cuts_books_written_with_a_larger_limit() -> None:
    """Books holding more than the limit load with only the newest entries."""
    history = History(runs={"p": tuple(entry(r) for r in range(10))})
    assert [e.run_id for e in bounded(history, 3).of("p")] == ["run-7", "run-8", "run-9"]


def test_pair_flakes_names_both_runs_when_the_kind_differs_on_the_same_bytes() -> None:
    """A property that passes in one run and fails in the other on the same commit, seal and image is a flake."""
    first = {"steady": entry(1), "flaky": entry(1)}
    second = {"steady": entry(2), "flaky": entry(2, Kind.FAIL_CONTRACT)}
    (flake,) = pair_flakes(first, second)
    assert flake.property_id == "flaky"
    assert (flake.first.run_id, flake.second.run_id) == ("run-1", "run-2")
    assert "run-1" in flake.line() and "run-2" in flake.line()


def test_pair_flakes_ignores_runs_on_different_bytes() -> None:
    """A kind that differs across seals, commits or images proves nothing about flakiness."""
    first = {"p": entry(1), "q": entry(1), "r": entry(1)}
    second = {
        "p": entry(2, Kind.FAIL_CONTRACT, seal=OTHER_SEAL),
        "q": entry(2, Kind.FAIL_CONTRACT, commit="beef"),
        "r": entry(2, Kind.FAIL_CONTRACT, image="sha256:j"),
    }
    assert pair_flakes(first, second) == ()


def test_runs_needed_is_three_over_the_target() -> None:
    """The default 5% target needs 60 passes in a row; a target outside (0, 1) is refused."""
    assert runs_needed() == 60
    assert runs_needed(0.1) == 30
    assert runs_needed(0.07) == 43
    assert runs_needed(0.03) == 100  # the most the history keeps
    for beyond in (0, 0.02, 1):
        with pytest.raises(ValueError):
            runs_needed(beyond)


def test_consecutive_passes_stop_at_a_failure_and_skip_other_seals() -> None:
    """The streak counts back from the newest run, skips runs under another seal and ends at any non-pass."""
    runs = [entry(0), entry(1, Kind.FAIL_CONTRACT), entry(2), entry(3, seal=OTHER_SEAL), entry(4), entry(5)]
    assert consecutive_passes(runs, seal=SEAL) == 3
    assert consecutive_passes(runs, seal=SEAL, since=T0 + timedelta(hours=4)) == 1
    assert consecutive_passes(runs, seal=OTHER_SEAL) == 1


def test_a_frozen_property_is_proposed_for_lifting_after_enough_passes() -> None:
    """With 60 passes in a row under the seal the freeze is due; with 59, or a failure among them, it is not."""
    history = History(runs={"p": tuple(entry(r) for r in range(60)), "q": tuple(entry(r) for r in range(59))})
    (lift,) = lift_due(history, {"p": "flake-p", "q": "flake-q"}, seal=SEAL)
    assert (lift.freeze_id, lift.passes, lift.needed, lift.run_ids) == ("flake-p", 60, 60, ("run-0", "run-59"))
    assert "flake-p" in lift.line()
    broken = History(runs={"p": (*(entry(r) for r in range(60)), entry(60, Kind.FAIL_CONTRACT))})
    assert lift_due(broken, {"p": "flake-p"}, seal=SEAL) == ()
    assert lift_due(history, {"p": "flake-p"}, seal=SEAL, target=0.1)[0].needed == 30


def test_the_file_store_carries_history_with_the_ledger(tmp_path: Path) -> None:
    """One update writes the ledger and the history together, and a later store reads both back."""
    path = tmp_path / "ledger.json"
    FileBooks(path, *TERMS, create=True).update(keep, history=lambda h: record(h, {"p": entry(1)}))
    FileBooks(path, *TERMS).update(keep, history=lambda h: record(h, {"p": entry(2)}))
    stored = json.loads(path.read_text())
    assert stored["version"] == 2
    assert [e["run_id"] for e in stored["history"]["p"]] == ["run-1", "run-2"]
    FileBooks(path, *TERMS).update(keep)  # an update without history keeps it
    assert len(json.loads(path.read_text())["history"]["p"]) == 2


def test_books_from_before_the_history_still_load(tmp_path: Path) -> None:
    """A ledger file with no version and no history loads, and the first history update adds to it."""
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps({"credits": {}, "sampler_window": [True]}))
    store = FileBooks(path, *TERMS)
    store.check()
    store.update(keep, history=lambda h: record(h, {"p": entry(1)}))
    stored = json.loads(path.read_text())
    assert stored["sampler_window"] == [True] and len(stored["history"]["p"]) == 1


@pytest.mark.parametrize(
    "history",
    [
        {"p": [{"run_id": "r"}]},  # an entry missing its fields
        {"p": "not a list"},
        {"p": [json.loads(entry(2).model_dump_json()), json.loads(entry(1).model_dump_json())]},  # out of order
    ],
)
def test_corrupt_history_is_refused_like_the_rest_of_the_books(tmp_path: Path, history: object) -> None:
    """A history that is malformed or out of order makes check() and update() refuse, leaving the file as it was."""
    path = tmp_path / "ledger.json"
    text = json.dumps({"version": 2, "credits": {}, "sampler_window": [], "history": history})
    path.write_text(text)
    for call in (lambda: FileBooks(path, *TERMS).check(), lambda: FileBooks(path, *TERMS).update(keep)):
        with pytest.raises(ConfigError):
            call()
    assert path.read_text() == text


def test_books_of_a_newer_version_are_refused(tmp_path: Path) -> None:
    """Books written by a newer probegate are refused rather than rewritten without what this one cannot read."""
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps({"version": 3, "credits": {}, "sampler_window": []}))
    with pytest.raises(ConfigError, match="newer"):
        FileBooks(path, *TERMS).check()


def test_record_keeps_entries_in_time_order() -> None:
    """A run recorded after a later one (concurrent runs deciding out of order) lands in its time's place."""
    history = record(record(History(), {"p": entry(5)}), {"p": entry(3)})
    assert [e.run_id for e in history.of("p")] == ["run-3", "run-5"]


@pytest.mark.parametrize(
    ("partial", "commit", "tree", "base", "why"),
    [
        (False, "c" * 40, "t1", "t1", ""),
        (True, "c" * 40, "t1", "t1", "partial run"),
        (False, None, "t1", "t1", "no --base"),
        (False, "c" * 40, "t1", None, "could not be laid out"),
        (False, "c" * 40, "t1", "t2", "the tree differs from base"),
    ],
)
def test_only_a_full_run_on_the_bases_own_tree_may_join_the_history(partial, commit, tree, base, why) -> None:
    """`base_run_refusal` is empty only for a full run with a base whose tree digest equals the run's."""
    refusal = base_run_refusal(partial=partial, base_commit=commit, tree_digest=tree, base_digest=base)
    assert (refusal == "") if not why else (why in refusal)


def test_created_reads_each_frozen_propertys_freeze_creation() -> None:
    """`created` maps a frozen property to its freeze's created_at, leaving out entries without one."""
    entries = [
        FreezeEntry(
            freeze_id=f, properties=(p,), seal=SEAL, reason="r", expires_at=T0 + timedelta(days=9), created_at=c
        )
        for f, p, c in (("new", "a", T0), ("old", "b", None))
    ]
    frozen = {"a": "new", "b": "old", "c": "gone"}
    assert created(FreezeFile(freezes=tuple(entries)), frozen) == {"a": T0}
    assert created(None, frozen) == {}
