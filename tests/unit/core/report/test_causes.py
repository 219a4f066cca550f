"""Measured causes in reports (gate.core.report.causes): freeze reasons, shared causes, the suite-wide map."""

from __future__ import annotations

from datetime import UTC, datetime

from gate.core.policy.explain import Explanation, Finding
from gate.core.policy.freezes import FreezeEntry, FreezeFile
from gate.core.policy.history import HistoryEntry, PairFlake
from gate.core.report.causes import cause_lines, cause_of, failed_together, shared, suite_causes, together_lines
from gate.core.verdicts.verdict import Kind

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def found(pid: str, source: str, finding: Finding = Finding.EXPLAINED) -> Explanation:
    return Explanation(property_id=pid, finding=finding, source=source, trials=40, words=f"{source} words")


def entry(pid: str, cause: str) -> FreezeEntry:
    return FreezeEntry(freeze_id=f"f-{pid}", properties=(pid,), seal="0" * 64, reason="r", expires_at=NOW, cause=cause)


def test_a_fixable_cause_says_so_and_the_residual_does_not() -> None:
    """hash_seed and trial_seed (alone or together) are fixable in the probe or the code; aslr and the
    residual are not said to be."""
    assert "fixable" in cause_of(found("a", "trial_seed+hash_seed"))
    assert "fixable" not in cause_of(found("a", "aslr"))
    assert "fixable" not in cause_of(found("a", "residual", Finding.RESIDUAL))
    assert cause_of(found("a", "", Finding.UNEXPLAINED)).startswith("cause not explained")


def test_flakes_with_one_cause_are_one_finding() -> None:
    """Two properties moved by the hash seed are one group; a lone cause is no group; unexplained ones never group."""
    causes = [found("a", "hash_seed"), found("b", "aslr"), found("c", "hash_seed"), found("d", "", Finding.UNEXPLAINED)]
    assert shared(causes) == {"hash_seed": ("a", "c")}
    [line] = cause_lines(causes[0], causes)
    assert "shared with `c`" in line and "40 trials" in line


def test_the_suite_wide_map_joins_the_freeze_file_and_the_new_measurements() -> None:
    """Freeze entries that record a cause join this pair's; a new measurement of a property replaces its old one."""
    freezes = FreezeFile(freezes=(entry("a", "residual"), entry("b", "aslr"), entry("z", "")))
    got = suite_causes(freezes, [found("b", "hash_seed"), found("c", "hash_seed")])
    assert got == {"hash_seed": ("b", "c"), "residual": ("a",)}
    assert suite_causes(None, []) == {}


def pair(pid: str, first: Kind, second: Kind) -> PairFlake:
    def at(run_id: str, kind: Kind) -> HistoryEntry:
        return HistoryEntry(run_id=run_id, at=NOW, seal="0" * 64, commit="c", image_id="i", kind=kind, trials=1, hits=0)

    return PairFlake(property_id=pid, first=at("run-1", first), second=at("run-2", second))


def test_flakes_that_failed_in_the_same_run_are_listed_together_unless_one_source_explains_them() -> None:
    """a and b failed in run-2 and passed in run-1: together; c failed in run-1 alone: no group; a flake
    with a measured cause leaves the group (its cause says more)."""
    flakes = [
        pair("a", Kind.PASS, Kind.FAIL_CONTRACT),
        pair("b", Kind.PASS, Kind.FAIL_SAFETY),
        pair("c", Kind.FAIL_CONTRACT, Kind.PASS),
    ]
    assert failed_together(flakes) == {"run-2": ("a", "b")}
    [line] = [x for x in together_lines(flakes, []) if x.startswith("- run")]
    assert "`a`, `b` failed together" in line
    assert together_lines(flakes, [found("a", "aslr")]) == []
    assert together_lines(flakes, [found("a", "", Finding.UNEXPLAINED)]) != []
