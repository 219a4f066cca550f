"""Flakes established on the base (issue 14): a row that changed colour on the patched tree is rerun on
the base tree in the same run; only a base that flickers too makes a flake, and only a contract flake
yields a freeze proposal, which freezes nothing until someone owns it. Whole runs over a MockExecutor,
in a real git repository made in tmp_path; no Docker."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import pytest
from support.git_trees import git, isolated_git, repo  # noqa: F401  (isolated_git: autouse fixture)
from support.mini_suite import (
    CHECKS_PY,
    CONTRACT,
    GATE_TOML,
    INVOICE,
    NOW,
    QUERY,
    RUN_ID,
    SAFETY,
    build_suite,
    good,
    run,
)
from support.mini_suite import Suite as MiniSuite
from support.mini_suite import stdout as printed

from gate.cli.summary import print_summary
from gate.core.card.carddiff import diff_cards
from gate.core.errors import SandboxError
from gate.core.policy.flakes import RerunVerdict, judge_base
from gate.core.policy.freezes import FreezeFile
from gate.core.report.html import render_html
from gate.core.report.markdown import md_inline, render_markdown
from gate.core.report.proposals import FREEZE_DAYS, freeze_id
from gate.core.suite.trial import FaultOrigin, FileChange, Observation, TrialSpec
from gate.core.verdicts.verdict import Band, ColourChange, Kind, Outcome, OutcomeKind
from gate.io.fixtures import seal_tree, write_seal_file
from gate.io.snapshot import tree_digest
from gate.run.request import RunRequest, RunResult

# What a hostile probe prints as its total: Markdown and HTML syntax, a newline, a heading, an ANSI escape.
HOSTILE = "0 | <img src=x onerror=alert(1)> `code` [link](http://evil.example)\n# PWNED \x1b[31m"


@dataclass
class Repo:
    root: Path
    request: RunRequest
    base: str  # the base commit the patch sits on


def flake_repo(tmp_path: Path, *, repeat: tuple[str, ...] = (CONTRACT,)) -> Repo:
    """The mini suite committed as the base (with `repeat = 4` on `repeat`'s properties), then a patch
    commit that changes the work folder; the card and books lie outside the repository."""
    toml = GATE_TOML
    for pid in repeat:
        toml = toml.replace(f'id = "{pid}"\n', f'id = "{pid}"\nrepeat = 4\n')
    files = {
        "gate.toml": toml,
        "checks.py": CHECKS_PY,
        "fixtures/clock.json": json.dumps({"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}),
        "fixtures/invoices/inv-001.json": json.dumps(INVOICE),
        "fixtures/tools/refund-query.json": json.dumps(QUERY),
        "work/probe.py": "print('{}')\n",
        "work/app.py": "RATE = 1\n",
    }
    root = tmp_path / "repo"
    (root / "fixtures").mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    write_seal_file(root / "fixtures.seal", seal_tree(root / "fixtures"))
    repo(root, {})
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "work" / "app.py").write_text("RATE = 2  # the patch\n")
    git(root, "commit", "-qam", "the patch")
    card = tmp_path / "out" / "card.json"
    request = RunRequest(
        suite=root / "gate.toml",
        workdir=root / "work",
        fixture=None,
        seal=root / "fixtures.seal",
        card=card,
        base=base,
        new_ledger=True,
        state_dir=tmp_path / "state",
    )
    return Repo(root=root, request=request, base=base)


def wrong_total(spec: TrialSpec) -> Observation:
    return Observation.of(spec, exit_code=0, image_id="sha256:mock", stdout=printed({"total": HOSTILE}))


def unmapped_write(spec: TrialSpec) -> Observation:
    writes = (FileChange(path="/work/leak.txt", change="created"),)
    return Observation.of(spec, exit_code=0, image_id="sha256:mock", writes=writes, stdout=printed({}))


def flicker(pid: str, bad, *, only_on: str | None = None):
    """`good`, except `pid`'s odd trials go `bad` — on every tree, or only on the tree `only_on`."""

    def handler(spec: TrialSpec, fixture: bytes) -> Observation:
        on_tree = only_on is None or spec.tree_digest == only_on
        if spec.property_id == pid and on_tree and spec.trial_index % 2:
            return bad(spec)
        return good(spec, fixture)

    return handler


def run_repo(r: Repo, handler, request: RunRequest | None = None) -> RunResult:
    suite = MiniSuite(request=request or r.request, fixtures=r.root / "fixtures", card=r.request.card, ledger=Path())
    result, _ = run(suite, handler)
    return result


def row(result: RunResult, pid: str):
    return next(r for r in result.card.properties if r.id == pid)


def beside(r: Repo, name: str) -> Path:
    assert r.request.card is not None
    return r.request.card.parent / name


def test_a_patch_that_makes_a_contract_property_flicker_earns_no_freeze(tmp_path: Path) -> None:
    """The contract flickers only on the patched tree's digest: the base is steady, so the row is refused
    (fail_contract, exit 1), the card says steady_on_base, and no proposal or repair task is written."""
    r = flake_repo(tmp_path)
    patched = tree_digest(r.request.workdir)
    result = run_repo(r, flicker(CONTRACT, wrong_total, only_on=patched))
    assert result.card.tree_digest == patched
    contract = row(result, CONTRACT)
    assert (contract.kind, contract.voting, result.card.exit_code) == (Kind.FAIL_CONTRACT, True, 1)
    assert contract.colour_change == ColourChange(hits=(0, 2), misses=(1, 3))
    rerun = contract.base_rerun
    assert rerun is not None and rerun.verdict is RerunVerdict.STEADY_ON_BASE
    assert (rerun.trials, rerun.hits, rerun.colour_change, rerun.base_commit) == (4, 4, None, r.base)
    assert rerun.tree_digest != patched
    assert result.card.flake_files is None
    assert not beside(r, "freeze-proposal.json").exists() and not beside(r, "repair-task.md").exists()


def test_a_flicker_on_both_trees_is_a_flake_with_a_proposal_and_a_repair_task(tmp_path: Path) -> None:
    """Seeded by trial index, the contract flickers on the base too: a flake. The run's exit is unchanged
    (1), and beside the card lie an ownerless freeze proposal and a repair task naming the run, seal,
    base commit and trial indices, with the probe's hostile text escaped."""
    r = flake_repo(tmp_path)
    result = run_repo(r, flicker(CONTRACT, wrong_total))
    card = result.card
    contract = row(result, CONTRACT)
    assert (contract.kind, contract.voting, card.exit_code) == (Kind.FAIL_CONTRACT, True, 1)
    assert contract.base_rerun is not None and contract.base_rerun.verdict is RerunVerdict.FLAKE
    assert contract.base_rerun.colour_change == ColourChange(hits=(0, 2), misses=(1, 3))
    seal = card.fixture.seal
    fid = freeze_id(CONTRACT, seal)
    assert card.flake_files is not None
    assert card.flake_files.model_dump() == {
        "freeze_proposal": "freeze-proposal.json",
        "repair_task": "repair-task.md",
        "freeze_ids": (fid,),
        "broken_safety": (),
    }
    proposal = FreezeFile.model_validate_json(beside(r, "freeze-proposal.json").read_text())
    (entry,) = proposal.freezes
    assert (entry.freeze_id, entry.properties, entry.seal, entry.owner, entry.retry_allowed) == (
        fid,
        (CONTRACT,),
        seal,
        "",
        False,
    )
    assert entry.expires_at == NOW + timedelta(days=FREEZE_DAYS)
    assert entry.created_at == NOW  # the lift streak counts only runs after the run that found it
    assert RUN_ID in entry.reason and r.base in entry.reason
    assert '"owner": ""' in beside(r, "freeze-proposal.json").read_text()  # shown, waiting to be filled in

    task = beside(r, "repair-task.md").read_text()
    for needle in (RUN_ID, seal, r.base, fid, "hits at trials 0, 2; misses at trials 1, 3", "owner"):
        assert needle in task, needle
    assert "freezes nothing" in task
    # The hostile total is quoted by the check on both sides, inert: no raw markup, newline or escape.
    assert task.count("total 0 &#124; &lt;img src=x onerror=alert(1)&gt; &#96;code&#96; &#91;link&#93;") == 2
    assert "<img" not in task and "`code`" not in task and "\x1b" not in task and "](http" not in task
    assert not [line for line in task.splitlines() if "PWNED" in line and line.startswith("#")]
    assert "&#92;n&#35; PWNED &#92;x1b&#91;31m" in task  # the newline and ESC shown as visible escapes


def test_a_safety_flake_is_reported_broken_and_never_proposed(tmp_path: Path) -> None:
    """A safety property flickering on both trees is a flake, but it is never frozen: no proposal file,
    the card lists it as broken safety, and the repair task says it must be fixed."""
    r = flake_repo(tmp_path, repeat=(SAFETY,))
    result = run_repo(r, flicker(SAFETY, unmapped_write))
    safety = row(result, SAFETY)
    assert (safety.kind, result.card.exit_code) == (Kind.FAIL_SAFETY, 1)
    assert safety.base_rerun is not None and safety.base_rerun.verdict is RerunVerdict.FLAKE
    assert result.card.flake_files is not None
    assert result.card.flake_files.freeze_ids == () and result.card.flake_files.freeze_proposal is None
    assert result.card.flake_files.broken_safety == (SAFETY,)
    assert not beside(r, "freeze-proposal.json").exists()
    task = beside(r, "repair-task.md").read_text()
    assert "is broken: fix it, it is never frozen" in task and "leak.txt" in task


def test_a_stale_proposal_is_removed_by_a_run_without_a_flake(tmp_path: Path) -> None:
    """A proposal from an earlier run never sits beside a card that does not name it; `gate diff` of the
    two cards names the base rerun and the proposed freeze that went away."""
    r = flake_repo(tmp_path)
    flaky = run_repo(r, flicker(CONTRACT, wrong_total)).card
    assert beside(r, "freeze-proposal.json").exists()
    result = run_repo(r, good, replace(r.request, new_ledger=False))
    assert result.card.flake_files is None
    diff = diff_cards(flaky, result.card)
    assert [(c.field, c.b) for c in diff.card if c.field == "proposed_freezes"] == [("proposed_freezes", [])]
    (contract,) = [p for p in diff.properties if p.id == CONTRACT]
    assert [(c.a, c.b) for c in contract.changes if c.field == "base_rerun"] == [("flake", None)]
    assert not beside(r, "freeze-proposal.json").exists() and not beside(r, "repair-task.md").exists()


def commit_proposal_to_base(r: Repo, owner: str) -> RunRequest:
    """The proposal merged into a new freeze file (owner filled in or not), committed on the base by its
    own commit, and the patch replayed on top: the request for the next run, judged against that base."""
    entries = json.loads(beside(r, "freeze-proposal.json").read_text())
    for entry in entries["freezes"]:
        entry["owner"] = owner
    patch = git(r.root, "rev-parse", "HEAD").strip()
    git(r.root, "checkout", "-q", "-b", "freeze", r.base)
    (r.root / "freeze.json").write_text(json.dumps(entries, indent=2))
    toml = r.root / "gate.toml"
    toml.write_text(
        toml.read_text().replace('checks = "checks.py"\n', 'checks = "checks.py"\nfreeze_file = "freeze.json"\n')
    )
    git(r.root, "add", "-A")
    git(r.root, "commit", "-qm", "freeze the flaky contract property")
    new_base = git(r.root, "rev-parse", "HEAD").strip()
    git(r.root, "cherry-pick", patch)
    card = r.request.card.parent.parent / "out2" / "card.json"  # type: ignore[union-attr]
    return replace(r.request, base=new_base, card=card)


@pytest.mark.parametrize("owner", ["@alice", ""])
def test_a_committed_proposal_freezes_the_property_only_with_an_owner(tmp_path: Path, owner: str) -> None:
    """The proposal, committed to the base with an owner, freezes the flaky property on the next run (it
    still runs and fails, but does not vote); committed as is, without an owner, it freezes nothing."""
    r = flake_repo(tmp_path)
    first = run_repo(r, flicker(CONTRACT, wrong_total))
    (fid,) = first.card.flake_files.freeze_ids  # type: ignore[union-attr]
    second = run_repo(r, flicker(CONTRACT, wrong_total), commit_proposal_to_base(r, owner))
    assert second.card.new_oracle_edits == ()
    contract = row(second, CONTRACT)
    assert contract.kind is Kind.FAIL_CONTRACT
    if owner:
        assert second.card.freeze_set == {CONTRACT: fid}
        assert (contract.voting, contract.frozen_by, second.card.exit_code) == (False, fid, 0)
    else:
        assert second.card.freeze_set == {} and second.card.freezes_inactive == {fid: "it has no owner"}
        assert (contract.voting, second.card.exit_code) == (True, 1)


def test_without_a_base_nothing_is_rerun_and_the_card_says_why(tmp_path: Path) -> None:
    """Without --base a colour change is reported with `base_rerun: null` and a `no_base_rerun` event."""
    suite = build_suite(tmp_path)
    toml = suite.request.suite
    toml.write_text(toml.read_text().replace(f'id = "{CONTRACT}"\n', f'id = "{CONTRACT}"\nrepeat = 4\n'))
    result, _ = run(suite, flicker(CONTRACT, wrong_total))
    assert row(result, CONTRACT).colour_change is not None and row(result, CONTRACT).base_rerun is None
    events = [e for e in result.card.harness_events if e.kind == "no_base_rerun"]
    assert [(e.property_id, "no base to rerun on" in e.detail) for e in events] == [(CONTRACT, True)]
    assert result.card.flake_files is None and not (suite.card.parent / "repair-task.md").exists()


def outcomes(*kinds: OutcomeKind) -> list[Outcome]:
    return [Outcome(trial_index=i, kind=k, detail="" if k is OutcomeKind.HIT else "no") for i, k in enumerate(kinds)]


@pytest.mark.parametrize(
    ("kinds", "planned", "verdict"),
    [
        ((OutcomeKind.HIT, OutcomeKind.MISS), 2, RerunVerdict.FLAKE),
        ((OutcomeKind.HIT, OutcomeKind.HIT), 2, RerunVerdict.STEADY_ON_BASE),
        ((OutcomeKind.MISS, OutcomeKind.MISS), 2, RerunVerdict.STEADY_ON_BASE),
        ((OutcomeKind.HIT, OutcomeKind.FAULT), 2, RerunVerdict.UNOBSERVED_ON_BASE),
        ((OutcomeKind.HIT, OutcomeKind.TIMEOUT), 2, RerunVerdict.UNOBSERVED_ON_BASE),
        ((OutcomeKind.HIT,), 2, RerunVerdict.UNOBSERVED_ON_BASE),
        ((), 2, RerunVerdict.UNOBSERVED_ON_BASE),
        ((OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.FAULT), 3, RerunVerdict.FLAKE),
    ],
)
def test_judge_base_calls_a_flake_only_on_hits_and_misses_on_the_base(kinds, planned, verdict) -> None:
    """Hits and misses on the base: a flake; every planned trial a hit, or every one a miss: steady; a
    fault, timeout or lost trial without a flicker: nothing was shown either way."""
    rerun = judge_base(Band.CONTRACT, outcomes(*kinds), base_commit="b" * 40, tree_digest="t", planned=planned)
    assert rerun.verdict is verdict


def test_reports_show_the_colour_change_its_base_rerun_and_the_files(tmp_path: Path) -> None:
    """The Markdown summary, the HTML report and the terminal summary each show the flake, its rerun on
    the base and the files written, without letting the probe's text out of its escaping."""
    r = flake_repo(tmp_path)
    card = run_repo(r, flicker(CONTRACT, wrong_total)).card
    fid = freeze_id(CONTRACT, card.fixture.seal)
    markdown = render_markdown(card)
    assert "**Colour changes**" in markdown
    assert f"base rerun on {r.base[:12]}: flake (2/4 hits)" in markdown
    assert md_inline(f"freeze-proposal.json (proposes {fid}; owner to fill in), repair-task.md") in markdown
    assert "<img" not in markdown and "\x1b" not in markdown
    page = render_html(card)
    assert 'id="flakes"' in page and f'data-property="{CONTRACT}" data-rerun="flake"' in page
    assert "<img" not in page and "\x1b" not in page
    out = io.StringIO()
    print_summary(card, file=out, terminal=False)
    text = out.getvalue()
    assert "flake (2/4 hits)" in text and "written beside the card: freeze-proposal.json" in text
    assert "\x1b" not in text and "\n# PWNED" not in text


@pytest.mark.parametrize("failure", ["raises", "faults"])
def test_a_base_that_cannot_be_observed_establishes_nothing(tmp_path: Path, failure: str) -> None:
    """An executor that fails during the base rerun (a `base_rerun_failed` event, no rerun) or base trials
    that fault (`unobserved_on_base`) propose nothing, and the patched row's refusal stands."""
    r = flake_repo(tmp_path)
    patched = tree_digest(r.request.workdir)
    flickering = flicker(CONTRACT, wrong_total)

    def handler(spec: TrialSpec, fixture: bytes) -> Observation:
        if spec.tree_digest == patched:
            return flickering(spec, fixture)
        if failure == "raises":
            raise SandboxError("docker daemon went away")
        return Observation.harness_fault(spec, "image vanished", origin=FaultOrigin.HARNESS)

    result = run_repo(r, handler)
    contract = row(result, CONTRACT)
    assert (contract.kind, result.card.exit_code, result.card.flake_files) == (Kind.FAIL_CONTRACT, 1, None)
    if failure == "raises":
        assert contract.base_rerun is None
        (event,) = [e for e in result.card.harness_events if e.kind == "base_rerun_failed"]
        assert event.property_id == CONTRACT and "docker daemon went away" in event.detail
    else:
        assert contract.base_rerun is not None and contract.base_rerun.verdict is RerunVerdict.UNOBSERVED_ON_BASE
    assert not beside(r, "repair-task.md").exists()
