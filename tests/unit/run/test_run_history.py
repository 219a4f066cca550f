"""Ordinary `gate run`s in the flake history (gate.run.runhistory): a full run on the base's own tree
records its frozen properties, so the lift streak counts them with the nightly pairs'; a patched tree's
runs never count, whether they pass the frozen property or fail it; the streak starts at the freeze's
`created_at`. Whole runs over a MockExecutor in a real git repository in tmp_path; no Docker."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from support.git_trees import git, isolated_git, repo  # noqa: F401  (isolated_git: autouse fixture)
from support.judging import in_process
from support.mini_suite import CHECKS_PY, CONTRACT, GATE_TOML, INVOICE, NOW, QUERY, good, run_request, stdout

from gate.cli.summary import print_summary
from gate.core.errors import FreezeFileError
from gate.core.policy.history import HistoryEntry, record
from gate.core.report.html import render_html
from gate.core.report.markdown import render_markdown
from gate.core.suite.suite import LedgerConfig, SamplerConfig
from gate.core.suite.trial import Observation, TrialSpec
from gate.core.verdicts.verdict import Kind
from gate.io.fixtures import seal_tree, write_seal_file
from gate.io.ledgerfile import FileBooks
from gate.run.baseline import run_baseline
from gate.run.executors.mock import MockExecutor
from gate.run.request import RunRequest, RunResult
from gate.run.runner import run_gate

FREEZE_ID = "flake-invoice"
# Five passes in a row bound the failure rate below 0.6 (ceil(3 / 0.6) = 5): small enough to reach here,
# and more than one nightly pair (two runs) plus one other run.
TARGET = 0.6


def freeze_repo(tmp_path: Path, *, created_at: datetime | None = NOW - timedelta(days=1)) -> RunRequest:
    """The mini suite with an owned freeze of the contract property, committed as the base (HEAD); the
    request runs `--base HEAD` on the work folder, card and books outside the repository."""
    root = tmp_path / "repo"
    for rel, text in {
        "fixtures/clock.json": json.dumps({"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}),
        "fixtures/invoices/inv-001.json": json.dumps(INVOICE),
        "fixtures/tools/refund-query.json": json.dumps(QUERY),
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    seal = seal_tree(root / "fixtures")
    write_seal_file(root / "fixtures.seal", seal)
    entry = {
        "freeze_id": FREEZE_ID,
        "properties": [CONTRACT],
        "seal": seal.digest,
        "reason": "flickers on the base",
        "expires_at": (NOW + timedelta(days=7)).isoformat(),
        "owner": "ana",
    }
    if created_at is not None:
        entry["created_at"] = created_at.isoformat()
    toml = GATE_TOML.replace('checks = "checks.py"', 'checks = "checks.py"\nfreeze_file = "freezes.json"')
    files = {
        "gate.toml": toml,
        "checks.py": CHECKS_PY,
        "freezes.json": json.dumps({"freezes": [entry]}),
        "work/probe.py": "print('{}')\n",
        "work/app.py": "RATE = 1\n",
    }
    repo(root, files)
    return RunRequest(
        suite=root / "gate.toml",
        workdir=root / "work",
        fixture=None,
        seal=root / "fixtures.seal",
        card=tmp_path / "out" / "card.json",
        base="HEAD",
        new_ledger=True,
        state_dir=tmp_path / "state",
    )


def gate_run(request: RunRequest, run_id: str, handler=good, **changes) -> RunResult:
    result = run_gate(
        replace(request, **changes),
        executor_factory=lambda _: MockExecutor(handler),
        judge_factory=in_process,
        now=lambda: NOW,
        run_id=run_id,
        emit=lambda _: None,
    )
    if request.new_ledger:
        object.__setattr__(request, "new_ledger", False)  # the books exist from now on
    return result


def patched(request: RunRequest) -> None:
    """The patch: an uncommitted edit of the work folder, so its tree is no longer the base's."""
    (request.workdir / "app.py").write_text("RATE = 2  # the patch\n")


def unpatched(request: RunRequest) -> None:
    (request.workdir / "app.py").write_text("RATE = 1\n")


def wrong_total(spec: TrialSpec, fixture: bytes) -> Observation:
    if spec.property_id == CONTRACT:
        return Observation.of(spec, exit_code=0, image_id="sha256:mock", stdout=stdout({"total": "0.00"}))
    return good(spec, fixture)


def history(request: RunRequest) -> list[dict]:
    assert request.card is not None
    return json.loads((request.card.parent / "ledger.json").read_text())["history"].get(CONTRACT, [])


def nightly(request: RunRequest, tmp_path: Path, night: int = 1, target: float = TARGET) -> dict:
    """`gate baseline --twice` on the work folder as it is; returns its `nightly` line."""
    out = io.StringIO()
    run_baseline(
        replace(request, new_ledger=False, base=None),
        tmp_path / "calibration.json",
        out=out,
        now=lambda: NOW,
        executor_factory=lambda _: MockExecutor(good),
        judge_factory=in_process,
        twice=True,
        run_ids=(f"night{night}-a", f"night{night}-b"),
        lift_target=target,
    )
    return json.loads(out.getvalue().splitlines()[-1])["nightly"]


def test_a_run_on_the_base_tree_records_its_frozen_property(tmp_path: Path) -> None:
    """A full `gate run --base HEAD` on the base commit's own tree adds one entry per frozen property (and
    none for the others) to the books' history, and its card and summary say so."""
    request = freeze_repo(tmp_path)
    result = gate_run(request, "base-1")
    assert result.card.freeze_set == {CONTRACT: FREEZE_ID}
    (entry,) = history(request)
    assert (entry["run_id"], entry["kind"], entry["commit"]) == ("base-1", "pass", result.card.base_rev)
    books = json.loads((tmp_path / "out" / "ledger.json").read_text())["history"]
    assert set(books) == {CONTRACT}
    assert result.card.flake_history.startswith("recorded in the flake history")
    assert "recorded in the flake history" in render_markdown(result.card)
    assert 'class="flake-history"' in render_html(result.card)
    out = io.StringIO()
    print_summary(result.card, file=out, terminal=False)
    assert "flake history: recorded" in out.getvalue()


def test_a_patch_run_that_passes_a_frozen_property_many_times_earns_no_lift(tmp_path: Path) -> None:
    """Adversarial: a patched tree passing the frozen property in run after run adds nothing to the history,
    so the nightly pair (two passes of the five needed) proposes no lift; two runs on the base's own tree
    and a second pair then make six, and the freeze is proposed for lifting (the pairs alone make four)."""
    request = freeze_repo(tmp_path)
    patched(request)
    for i in range(6):
        result = gate_run(request, f"patch-{i}")
        assert "the tree differs from base" in result.card.flake_history
        assert result.card.freeze_set == {CONTRACT: FREEZE_ID}
    assert history(request) == []
    unpatched(request)
    assert nightly(request, tmp_path)["lift"] == []
    for i in range(2):
        gate_run(request, f"base-{i}")
    (lift,) = nightly(request, tmp_path, night=2)["lift"]
    assert FREEZE_ID in lift and "6 runs in a row" in lift
    runs = ["night1-a", "night1-b", "base-0", "base-1", "night2-a", "night2-b"]
    assert [e["run_id"] for e in history(request)] == runs


def test_a_patch_run_that_fails_a_frozen_property_cannot_end_the_streak(tmp_path: Path) -> None:
    """Adversarial: a patch that fails the frozen property on purpose (excused, as it is frozen) is not
    recorded, so the base's three passes and the pair's two make the five needed, and the lift is proposed."""
    request = freeze_repo(tmp_path)
    for i in range(3):
        gate_run(request, f"base-{i}")
    patched(request)
    failed = gate_run(request, "patch-fails", wrong_total)
    frozen_row = next(r for r in failed.card.properties if r.id == CONTRACT)
    assert (frozen_row.kind, frozen_row.voting) == (Kind.FAIL_CONTRACT, False)
    assert [e["kind"] for e in history(request)] == ["pass"] * 3
    unpatched(request)
    (lift,) = nightly(request, tmp_path)["lift"]
    assert FREEZE_ID in lift


@pytest.mark.parametrize("how", ["partial", "no_base"])
def test_a_partial_run_or_one_without_base_is_not_recorded(tmp_path: Path, how: str) -> None:
    """A `-k` run on the base tree (partial runs write no books) and a run without --base (its tree cannot
    be shown to be the base's) add nothing to the history; the card says why."""
    request = freeze_repo(tmp_path)
    gate_run(request, "first")  # makes the books
    changes = {"keyword": "invoice"} if how == "partial" else {"base": None}
    result = gate_run(request, "second", **changes)
    assert [e["run_id"] for e in history(request)] == ["first"]
    why = "a partial run" if how == "partial" else "no --base"
    assert why in result.card.flake_history


def test_without_frozen_properties_nothing_is_recorded(tmp_path: Path) -> None:
    """A run with no frozen property writes no history and no note on its card."""
    request = freeze_repo(tmp_path)
    (request.suite.parent / "freezes.json").write_text(json.dumps({"freezes": []}))
    git(request.suite.parent, "commit", "-qam", "no freezes")
    result = gate_run(request, "r")
    assert result.card.flake_history == "" and history(request) == []


def test_the_streak_starts_at_the_freezes_creation(tmp_path: Path) -> None:
    """Passes recorded before the freeze's `created_at` do not count: 60 old passes plus the pair make no
    lift at the default target; the same entry without `created_at` keeps the old rule and is lifted."""
    for created, lifted in ((NOW - timedelta(days=1), False), (None, True)):
        where = tmp_path / ("created" if created else "old")
        request = freeze_repo(where, created_at=created)
        gate_run(request, "first")  # makes the books
        seal = seal_tree(request.suite.parent / "fixtures").digest
        old = [
            HistoryEntry(
                run_id=f"old-{i}", at=NOW - timedelta(days=30, hours=i), seal=seal, kind=Kind.PASS, trials=1, hits=1
            )
            for i in range(60)
        ]

        def seed(h, old=old):
            for entry in old:
                h = record(h, {CONTRACT: entry})
            return h

        assert request.card is not None
        FileBooks(request.card.parent / "ledger.json", LedgerConfig(), SamplerConfig()).update(
            lambda ledger, window: (None, ledger, window), history=seed
        )
        lifts = nightly(request, where, target=0.05)["lift"]  # 60 needed
        assert bool(lifts) is lifted, (created, lifts)


@pytest.mark.parametrize(
    ("created", "field"),
    [
        ((NOW + timedelta(days=7)).isoformat(), "freezes.0.created_at"),
        ((NOW + timedelta(days=30)).isoformat(), "freezes.0.created_at"),
        ("2026-12-01T00:00:00", "freezes.0.created_at"),
    ],
)
def test_a_freeze_created_at_or_after_its_expiry_or_without_offset_is_refused(
    tmp_path: Path, created: str, field: str
) -> None:
    """A freeze entry whose `created_at` is not before its `expires_at`, or carries no offset, refuses the
    freeze file in one line naming the file and the field, before any trial."""
    request = freeze_repo(tmp_path)
    path = request.suite.parent / "freezes.json"
    data = json.loads(path.read_text())
    data["freezes"][0]["created_at"] = created
    path.write_text(json.dumps(data))
    git(request.suite.parent, "commit", "-qam", "edit the freeze")
    executor = MockExecutor(good)
    with pytest.raises(FreezeFileError) as caught:
        run_request(request, executor, lambda _: None, run_id="r")
    assert "freezes.json" in str(caught.value) and field in str(caught.value)
    assert "\n" not in str(caught.value) and executor.calls == []
