"""`gate baseline --twice` (gate.run.nightly): the nightly pair records both runs in the books'
history, names a property that changed colour between them with both run ids (a freeze proposal for
a contract property, a broken safety property never proposed), and proposes lifting a freeze whose
property passed enough recorded runs in a row."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from support.judging import in_process
from support.mini_suite import CONTRACT, NOW, SAFETY, Suite, build_suite, good, run, stdout

from gate.core.errors import RET_BLOCKED, RET_OK, RET_USAGE, InputMissingError
from gate.core.policy.history import HistoryEntry, record
from gate.core.suite.trial import FileChange, Observation, TrialSpec
from gate.core.verdicts.verdict import Kind
from gate.io.bookstore import MemoryBooks
from gate.io.ledgerfile import FileBooks
from gate.io.reports import ReportTargets
from gate.run.baseline import run_baseline
from gate.run.executors.mock import MockExecutor

RUNS = ("nightly-a", "nightly-b")


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    built = build_suite(tmp_path)
    run(built, good)  # creates the ledger file beside the card
    return built


def flicker(property_id: str):
    """`good`, except that `property_id` misses every trial after its first call (a call counter per
    trial index), so the first run passes and the second fails on the same bytes."""
    calls: dict[str, int] = {}

    def handler(spec: TrialSpec, fixture: bytes) -> Observation:
        if spec.property_id != property_id:
            return good(spec, fixture)
        calls[spec.trial_index] = calls.get(spec.trial_index, 0) + 1
        if calls[spec.trial_index] == 1:
            return good(spec, fixture)
        if property_id == CONTRACT:
            return Observation.of(spec, exit_code=0, stdout=stdout({"total": "0.00"}))
        unmapped = (FileChange(path="/work/secret.txt", change="created"),)  # outside the write map
        return Observation.of(spec, exit_code=0, stdout=stdout({}), writes=unmapped)

    return handler


def nightly(suite: Suite, handler, tmp_path: Path, **kwargs) -> tuple[int, list[dict]]:
    out = io.StringIO()
    executor = MockExecutor(handler)
    code = run_baseline(
        replace(suite.request, new_ledger=False),
        tmp_path / "calibration.json",
        out=out,
        now=lambda: NOW,
        executor_factory=lambda _: executor,
        judge_factory=in_process,
        twice=True,
        run_ids=RUNS,
        **kwargs,
    )
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_steady_pair_records_both_runs_and_proposes_nothing(suite: Suite, tmp_path: Path) -> None:
    """Two agreeing runs land in the ledger file's history under both run ids, exit 0, and write no proposal."""
    code, lines = nightly(suite, good, tmp_path)
    assert code == RET_OK
    history = json.loads(suite.ledger.read_text())["history"]
    assert [e["run_id"] for e in history[CONTRACT]] == list(RUNS)
    assert lines[-1]["nightly"]["flakes"] == []
    assert not (suite.card.parent / "freeze-proposal.json").exists()
    assert not (suite.card.parent / "repair-task.md").exists()
    assert (suite.card.parent / "card.first.json").exists()


def test_a_contract_property_that_changes_colour_between_the_runs_is_proposed_naming_both(
    suite: Suite, tmp_path: Path
) -> None:
    """A contract property passing in the first run and failing in the second yields a freeze proposal and a
    repair task naming both run ids, and exit 1."""
    code, lines = nightly(suite, flicker(CONTRACT), tmp_path)
    assert code == RET_BLOCKED
    proposal = json.loads((suite.card.parent / "freeze-proposal.json").read_text())
    (entry,) = proposal["freezes"]
    assert entry["properties"] == [CONTRACT] and entry["owner"] == "" and entry["retry_allowed"] is False
    assert entry["created_at"] == NOW.isoformat().replace("+00:00", "Z")  # the second run's start
    assert all(run_id in entry["reason"] for run_id in RUNS)
    task = (suite.card.parent / "repair-task.md").read_text()
    assert all(run_id in task for run_id in RUNS) and entry["seal"] in task
    assert lines[-1]["nightly"]["freezes_proposed"] == [entry["freeze_id"]]
    card = json.loads(suite.card.read_text())
    assert card["flake_files"]["freeze_ids"] == [entry["freeze_id"]] and card["run_id"] == RUNS[1]


def test_the_pair_writes_its_reports_from_the_final_card(suite: Suite, tmp_path: Path) -> None:
    """The Markdown summary and HTML report of the pair name the flake files written beside the card, and
    the colour change between the runs with both run ids (on the card as `pair_flakes`)."""
    md, page = tmp_path / "summary.md", tmp_path / "report.html"
    reports = ReportTargets(summary_md=md, report_html=page)
    suite = replace(suite, request=replace(suite.request, reports=reports))
    nightly(suite, flicker(CONTRACT), tmp_path)
    assert "freeze-proposal.json" in md.read_text() and "freeze-proposal.json" in page.read_text()
    (flake,) = json.loads(suite.card.read_text())["pair_flakes"]
    assert (flake["property_id"], flake["first"]["run_id"], flake["second"]["run_id"]) == (CONTRACT, *RUNS)
    assert "Colour changes between the nightly runs" in md.read_text()
    assert all(f"run {run_id}" in md.read_text() for run_id in RUNS)
    assert 'class="pair-flake"' in page.read_text() and all(run_id in page.read_text() for run_id in RUNS)


def test_a_safety_property_that_changes_colour_is_reported_broken_never_proposed(suite: Suite, tmp_path: Path) -> None:
    """A safety flake between the two runs gets a repair task saying it is broken, and no freeze proposal."""
    code, lines = nightly(suite, flicker(SAFETY), tmp_path)
    assert code == RET_BLOCKED
    assert lines[-1]["nightly"]["broken_safety"] == [SAFETY]
    assert not (suite.card.parent / "freeze-proposal.json").exists()
    assert "never frozen" in (suite.card.parent / "repair-task.md").read_text()


def test_the_pair_refuses_a_missing_store_before_any_trial(tmp_path: Path) -> None:
    """Without books to keep the history in, the pair is refused before the executor opens."""
    suite = build_suite(tmp_path)
    executor = MockExecutor(good)
    with pytest.raises(InputMissingError):
        run_baseline(
            replace(suite.request, new_ledger=False),
            tmp_path / "calibration.json",
            out=io.StringIO(),
            now=lambda: NOW,
            executor_factory=lambda _: executor,
            judge_factory=in_process,
            twice=True,
        )
    assert executor.calls == []


def test_the_pair_never_touches_credits_or_the_window(suite: Suite, tmp_path: Path) -> None:
    """The pair writes only the history: the ledger's credits and sampler window are as the last run left them."""
    before = json.loads(suite.ledger.read_text())
    nightly(suite, flicker(CONTRACT), tmp_path)
    after = json.loads(suite.ledger.read_text())
    assert (after["credits"], after["sampler_window"]) == (before["credits"], before["sampler_window"])


def test_a_frozen_property_that_passed_enough_runs_is_proposed_for_lifting(suite: Suite, tmp_path: Path) -> None:
    """With 58 recorded passes, the pair's two passing runs make 60: a lift proposal is written for its freeze."""
    seal = json.loads(suite.card.read_text())["fixture"]["seal"]
    freeze = {
        "freezes": [
            {
                "freeze_id": "flake-invoice",
                "properties": [CONTRACT],
                "seal": seal,
                "reason": "flickers",
                "expires_at": (NOW + timedelta(days=7)).isoformat(),
                "owner": "ana",
            }
        ]
    }
    (suite.request.suite.parent / "freezes.json").write_text(json.dumps(freeze))
    toml = suite.request.suite.read_text().replace(
        'checks = "checks.py"', 'checks = "checks.py"\nfreeze_file = "freezes.json"'
    )
    suite.request.suite.write_text(toml)
    past = {
        CONTRACT: [
            HistoryEntry(
                run_id=f"old-{i}", at=NOW - timedelta(days=60 - i), seal=seal, kind=Kind.PASS, trials=1, hits=1
            )
            for i in range(58)
        ]
    }
    store = FileBooks(suite.ledger, *_terms())

    def seed(history):
        for entries in zip(*past.values(), strict=True):
            history = record(history, dict(zip(past, entries, strict=True)))
        return history

    store.update(lambda ledger, window: (None, ledger, window), history=seed)
    suite = replace(suite, request=replace(suite.request, reports=ReportTargets(summary_md=tmp_path / "summary.md")))
    code, lines = nightly(suite, good, tmp_path)
    assert code == RET_OK
    (lift,) = lines[-1]["nightly"]["lift"]
    assert "flake-invoice" in lift and "60" in lift
    note = (suite.card.parent / "lift-proposal.md").read_text()
    assert "Freezes due to be lifted" in (tmp_path / "summary.md").read_text()
    assert "flake-invoice" in note and "nightly-b" in note
    (on_card,) = json.loads(suite.card.read_text())["lift_proposals"]
    assert (on_card["freeze_id"], on_card["passes"], on_card["needed"]) == ("flake-invoice", 60, 60)


def _terms():
    from gate.core.suite.suite import LedgerConfig, SamplerConfig

    return LedgerConfig(), SamplerConfig()


def test_memory_books_keep_history() -> None:
    """The in-memory store applies a history update with its ledger update."""
    from gate.core.suite.suite import LedgerConfig, SamplerConfig

    books = MemoryBooks(LedgerConfig(), SamplerConfig())
    entry = HistoryEntry(run_id="r", at=NOW, seal="a" * 64, kind=Kind.PASS, trials=1, hits=1)
    books.update(lambda ledger, window: (None, ledger, window), history=lambda h: record(h, {"p": entry}))
    assert books.history.of("p") == (entry,)


@pytest.mark.parametrize(
    "extra",
    [["--new-ledger"], ["--twice", "--lift-target", "0.01"], ["--twice", "--lift-target", "1"]],
)
def test_the_command_line_refuses_new_books_without_twice_and_an_unreachable_lift_target(
    suite: Suite, tmp_path: Path, extra: list[str]
) -> None:
    """`baseline --new-ledger` without --twice, or a lift target the history cannot reach, exits 64 before any trial."""
    from gate.cli.main import main

    argv = ["baseline", "--suite", str(suite.request.suite), "--workdir", str(suite.request.workdir)]
    argv += ["--seal", str(suite.request.seal), "--calibration", str(tmp_path / "cal.json"), *extra]
    assert main(argv) == RET_USAGE
    assert not (tmp_path / "cal.json").exists()


def test_the_pair_refuses_a_ledger_that_is_its_calibration(suite: Suite, tmp_path: Path) -> None:
    """`baseline --twice --ledger F --calibration F` is a usage error before any trial: one file cannot be both."""
    from gate.cli.main import main

    same = tmp_path / "same.json"
    argv = ["baseline", "--twice", "--suite", str(suite.request.suite), "--workdir", str(suite.request.workdir)]
    argv += ["--seal", str(suite.request.seal), "--calibration", str(same), "--ledger", str(same)]
    assert main(argv) == RET_USAGE
    assert not same.exists()


def missed(spec: TrialSpec) -> Observation:
    """A trial of the mini suite's contract or safety property that misses."""
    if spec.property_id == CONTRACT:
        return Observation.of(spec, exit_code=0, stdout=stdout({"total": "0.00"}))
    unmapped = (FileChange(path="/work/secret.txt", change="created"),)  # outside the write map
    return Observation.of(spec, exit_code=0, stdout=stdout({}), writes=unmapped)


def by_hash_seed():
    """The pair's trials (no hash seed set) flicker by call; explain's hit exactly on even hash seeds."""
    pair = {CONTRACT: flicker(CONTRACT), SAFETY: flicker(SAFETY)}

    def handler(spec: TrialSpec, fixture: bytes) -> Observation:
        if spec.hash_seed is None:
            return pair.get(spec.property_id, good)(spec, fixture)
        return good(spec, fixture) if spec.hash_seed % 2 == 0 else missed(spec)

    return handler


def test_the_pair_explains_each_flake_and_groups_a_shared_cause(suite: Suite, tmp_path: Path) -> None:
    """Flakes moved by the hash seed carry that cause in the freeze reason, the repair task (listed once
    under Shared causes), the card and the nightly line; the exit code is the pair's as before."""
    code, lines = nightly(suite, by_hash_seed(), tmp_path)
    assert code == RET_BLOCKED
    assert lines[-1]["nightly"]["causes"] == {CONTRACT: "hash_seed", SAFETY: "hash_seed"}
    (entry,) = json.loads((suite.card.parent / "freeze-proposal.json").read_text())["freezes"]
    assert "cause hash_seed (fixable in the probe or the code)" in entry["reason"] and entry["cause"] == "hash_seed"
    assert lines[-1]["nightly"]["suite_causes"] == {"hash_seed": sorted([CONTRACT, SAFETY])}
    task = (suite.card.parent / "repair-task.md").read_text()
    assert task.count("## Shared causes") == 1 and task.count("- Cause: `hash_seed` (fixable") == 2
    card = json.loads(suite.card.read_text())
    assert [c["source"] for c in card["flake_causes"]] == ["hash_seed", "hash_seed"]
