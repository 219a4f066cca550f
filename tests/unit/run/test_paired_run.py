"""The paired rule's run path through `run_gate` over a MockExecutor: with --base, each trial index of a
paired property runs on the base tree and on the patched tree in the same waves (same seed, fixture and
clock), the sequential test stops the waves, the base's trials are recorded beside the patch's, and a
resume reuses both sides' stored trials."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from support.git_trees import git, isolated_git, repo  # noqa: F401  (isolated_git: autouse fixture)
from support.html_page import Page
from support.mini_suite import CHECKS_PY, GATE_TOML, INVOICE, QUERY, STAT, good, run, run_request, stdout
from support.mini_suite import Suite as MiniSuite

from gate.core.card.acceptance import recomputed_reasons
from gate.core.card.evidence import refold
from gate.core.errors import RET_USAGE, UsageError
from gate.core.report.evidence_view import build_review, by_digest
from gate.core.report.html import render_html
from gate.core.report.markdown import md_inline, render_markdown
from gate.core.suite.trial import Observation, Side, TrialSpec
from gate.core.verdicts.verdict import Kind
from gate.io.evidence import verified_records
from gate.io.fixtures import seal_tree, write_seal_file
from gate.io.journal import journal_path
from gate.run.executors.mock import MockExecutor, MockFleet
from gate.run.request import RunRequest, RunResult

PAIRED = 'check = "checks:tool_choice"\nrule = "paired"\nmargin = 0.05\nalpha = 0.05\nbeta = 0.05\nmax_pairs = 400\n'


class Killed(Exception):
    """Stands for the coordinator dying: nothing after it runs."""


@dataclass
class Repo:
    root: Path
    request: RunRequest


def paired_repo(tmp_path: Path) -> Repo:
    """The mini suite with its statistical property paired, committed as the base, then a patch commit."""
    files = {
        "gate.toml": GATE_TOML.replace('check = "checks:tool_choice"\n', PAIRED),
        "checks.py": CHECKS_PY,
        "fixtures/clock.json": json.dumps({"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}),
        "fixtures/invoices/inv-001.json": json.dumps(INVOICE),
        "fixtures/tools/refund-query.json": json.dumps(QUERY),
        "work/probe.py": "print('{}')\n",
        "work/app.py": "RATE = 1\n",
    }
    root = tmp_path / "repo"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    write_seal_file(root / "fixtures.seal", seal_tree(root / "fixtures"))
    repo(root, {})
    base = git(root, "rev-parse", "HEAD").strip()
    (root / "work" / "app.py").write_text("RATE = 2  # the patch\n")
    git(root, "commit", "-qam", "the patch")
    request = RunRequest(
        suite=root / "gate.toml",
        workdir=root / "work",
        fixture=None,
        seal=root / "fixtures.seal",
        card=tmp_path / "out" / "card.json",
        state_dir=tmp_path / "state",
        base=base,
        new_ledger=True,
    )
    return Repo(root=root, request=request)


def rates(base: float, patch: float, asked: list[TrialSpec] | None = None):
    """`good`, except the paired property holds on a trial when its seed's uniform draw is below the side's
    rate: both sides of a pair share the seed, so the pairs are as coupled as the same fixture makes them."""

    def handler(spec: TrialSpec, fixture: bytes) -> Observation:
        if spec.property_id != STAT:
            return good(spec, fixture)
        if asked is not None:
            asked.append(spec)
        rate = base if spec.side is Side.BASE else patch
        held = (spec.seed % 10_000) / 10_000 < rate
        tool = json.loads(fixture)["expected_tool"] if held else "refunds.cancel"
        return Observation.of(spec, exit_code=0, image_id="sha256:mock", stdout=stdout({"tool": tool}))

    return handler


def run_repo(r: Repo, handler, request: RunRequest | None = None) -> RunResult:
    card = r.request.card or Path()
    suite = MiniSuite(request=request or r.request, fixtures=r.root / "fixtures", card=card, ledger=Path())
    result, _ = run(suite, handler)
    return result


def stat_row(result: RunResult):
    return next(row for row in result.card.properties if row.id == STAT)


def test_an_unchanged_rate_passes_on_pairs_run_on_both_trees_in_the_same_waves(tmp_path: Path) -> None:
    """Base and patch at 0.95: both trees run every index with one seed, wave by wave, and the pairs pass."""
    r = paired_repo(tmp_path)
    asked: list[TrialSpec] = []
    result = run_repo(r, rates(0.95, 0.95, asked))
    row = stat_row(result)
    assert row.kind is Kind.PASS and row.paired is not None
    assert row.paired.pairs.pairs == row.trials == row.paired.base.trials and row.trials < 400
    base = {s.trial_index: s for s in asked if s.side is Side.BASE}
    patch = {s.trial_index: s for s in asked if s.side is Side.PATCH}
    assert sorted(base) == sorted(patch) == list(range(row.trials))
    assert all(base[i].seed == patch[i].seed and base[i].fixture_digest == patch[i].fixture_digest for i in base)
    assert len({s.tree_digest for s in base.values()}) == 1 and base[0].tree_digest != patch[0].tree_digest
    assert "no worse than the base" in row.detail and recomputed_reasons(result.card) == []


def test_a_patch_that_lowers_the_rate_a_little_is_blocked_with_the_reason(tmp_path: Path) -> None:
    """Base 0.95, patch 0.85: inconclusive_sample, the reason naming the base, though 8 of 10 would pass it."""
    r = paired_repo(tmp_path)
    result = run_repo(r, rates(0.95, 0.85))
    row = stat_row(result)
    assert row.kind is Kind.INCONCLUSIVE_SAMPLE and row.paired is not None
    assert "worse than the base by 0.05" in row.detail and row.paired.pairs.base_only > 0
    assert row.hits >= 0.8 * row.trials  # the patch side alone clears a fixed 0.8 band
    assert recomputed_reasons(result.card) == [] and result.card.status != "pass"


def test_the_base_trials_are_recorded_beside_the_patch_and_refold_agrees(tmp_path: Path) -> None:
    """The evidence store holds both sides' records of the paired row, and the re-fold of them agrees with the card."""
    r = paired_repo(tmp_path)
    result = run_repo(r, rates(0.95, 0.85))
    assert r.request.card is not None
    records = verified_records(result.card, r.request.card)
    mine = [rec for rec in records if rec.property_id == STAT]
    sides = {side: sorted(rec.trial_index for rec in mine if rec.side is side) for side in Side}
    assert sides[Side.BASE] == sides[Side.PATCH] == list(range(stat_row(result).trials))
    assert refold(result.card, records).agrees
    relabelled = [rec.model_copy(update={"observation": rec.observation.model_copy(update={"side": Side.PATCH})})
                  for rec in records]  # fmt: skip
    assert not refold(result.card, relabelled).agrees  # a base record passed off as the patch's is seen


def test_gate_evidence_shows_the_base_trials_marked_as_the_base(tmp_path: Path) -> None:
    """The evidence view of a paired row has a second view, of its base-tree trials, each marked as the base's."""
    r = paired_repo(tmp_path)
    result = run_repo(r, rates(0.95, 0.85))
    assert r.request.card is not None
    review = build_review(result.card, by_digest(verified_records(result.card, r.request.card)), only={STAT})
    patch, base = review.properties
    assert (patch.side, base.side) == (Side.PATCH, Side.BASE) and base.counts.trials == patch.counts.trials
    assert base.problems and all(t.side is Side.BASE for t in (*base.problems, *base.passes))
    text = review.to_text()
    assert f"property {STAT} on the base (" in text and "  base trial " in text
    assert {p["side"] for p in json.loads(review.to_json())["properties"]} == {"patch", "base"}


def test_a_resume_reuses_both_sides_stored_trials(tmp_path: Path) -> None:
    """A run stopped mid-way resumes with the base's stored trials reused under their side, and decides alike."""
    r = paired_repo(tmp_path)
    whole = stat_row(run_repo(r, rates(0.95, 0.95)))
    fresh = replace(r.request, card=tmp_path / "again" / "card.json")
    seen = 0

    def stopping(spec: TrialSpec, fixture: bytes) -> Observation:
        nonlocal seen
        if spec.property_id == STAT:
            seen += 1
            if seen > 25:
                raise Killed
        return rates(0.95, 0.95)(spec, fixture)

    with pytest.raises(Killed):
        run_repo(r, stopping, fresh)
    assert fresh.card is not None and journal_path(fresh.card, fresh.state_dir).exists()
    asked: list[TrialSpec] = []
    resumed = run_repo(r, rates(0.95, 0.95, asked), replace(fresh, resume=True, new_ledger=True))
    row = stat_row(resumed)
    assert (row.kind, row.trials, row.paired) == (whole.kind, whole.trials, whole.paired)
    assert {s.side for s in asked} == {Side.BASE, Side.PATCH} and len(asked) < 2 * row.trials
    assert any(e.kind == "resumed" for e in resumed.card.harness_events)


def test_the_html_report_draws_the_paired_statistic_against_its_bounds(tmp_path: Path) -> None:
    """The page plots the llr after each pair up to line A for a worse patch, the base's rate on the rate
    plot, the base trials in a block of their own, and no path when the records disagree with the row."""
    r = paired_repo(tmp_path)
    result = run_repo(r, rates(0.95, 0.85))
    assert r.request.card is not None
    records = verified_records(result.card, r.request.card)
    row = stat_row(result)
    assert row.paired is not None
    page = Page(render_html(result.card, records))
    (group,) = page.by_class("paired-path")
    assert (group["data-property"], group["data-decision"]) == (STAT, "worse")
    assert group["data-pairs"] == str(row.paired.pairs.pairs)
    (polyline,) = [p for p in page.by_class("llr") if p is not None]
    drawn = [tuple(map(float, xy.split(","))) for xy in (polyline["points"] or "").split()]
    assert len(drawn) == row.paired.pairs.pairs
    (reject,) = page.by_class("reject")
    assert drawn[-1][1] <= float(reject["y1"] or "nan")  # at or past A (SVG y grows downwards)
    (rate,) = [g for g in page.by_class("rate-row") if g["data-property"] == STAT]
    base = row.paired.base
    assert rate["data-rule"] == "paired" and float(rate["data-base-rate"] or "nan") == pytest.approx(
        base.hit / base.trials
    )
    assert {b["data-side"] for b in page.by_class("trials") if b["data-property"] == STAT} == {"patch", "base"}
    patch_only = [rec for rec in records if rec.side is Side.PATCH]
    assert not Page(render_html(result.card, patch_only)).by_class("paired-path")


class PatchTreesOnly(MockExecutor):
    """An executor that lays out the patched tree only (one that never says it serves every tree)."""

    serves_every_tree = False


def test_an_executor_that_cannot_lay_out_the_base_tree_is_refused_before_any_trial(tmp_path: Path) -> None:
    """A paired property through an executor that would fault every base trial is refused in one line (exit 64)."""
    r = paired_repo(tmp_path)
    asked: list[TrialSpec] = []
    executor = PatchTreesOnly(rates(0.95, 0.95, asked))
    with pytest.raises(UsageError, match="lays out the patched tree only") as refused:
        run_request(r.request, executor)
    assert refused.value.exit_code == RET_USAGE and asked == []
    assert r.request.card is not None and not r.request.card.exists()


def test_the_summaries_give_the_base_hits_beside_the_patch_hits(tmp_path: Path) -> None:
    """The Markdown summary's hits cell of a paired row names the base's hits of the same indices."""
    r = paired_repo(tmp_path)
    result = run_repo(r, rates(0.95, 0.85))
    row = stat_row(result)
    assert row.paired is not None
    base = row.paired.base
    lines = render_markdown(result.card).splitlines()
    line = next(ln for ln in lines if ln.startswith(f"| {md_inline(STAT)} "))
    assert f"| {row.trials} | {row.hits} (base {base.hit}/{base.trials}) |" in line
    assert "(base " not in next(ln for ln in lines if ln.startswith(f"| {md_inline('invoice_total')} "))


def no_difference(base: float, patch: float, liar: str):
    """A fleet handler: every worker reports the seeded truth (`rates`), except `liar`, which reports the base
    side's outcome for the patch side of every pair it runs: "no difference"."""
    truth = rates(base, patch)

    def handler(spec: TrialSpec, fixture: bytes, worker: str) -> Observation:
        if worker == liar and spec.side is Side.PATCH and spec.property_id == STAT:
            return truth(spec.model_copy(update={"side": Side.BASE}), fixture).model_copy(update={"side": Side.PATCH})
        return truth(spec, fixture)

    return handler


def fleet_request(r: Repo, share: float) -> RunRequest:
    return replace(r.request, cross_check=share)


def test_a_liar_running_both_sides_buys_the_pass_only_without_replays(tmp_path: Path) -> None:
    """Adversarial: a worker that runs both sides of its pairs and reports no difference passes a patch at 0.5
    against a base at 0.95 when it runs every pair and nothing is replayed."""
    r = paired_repo(tmp_path)
    fleet = MockFleet(no_difference(0.95, 0.5, "liar"), ["liar"])
    result = run_request(fleet_request(r, 0.0), fleet, lambda _: None)
    row = stat_row(result)
    assert row.kind is Kind.PASS and row.paired is not None and row.paired.pairs.discordant == 0


def test_replays_rerun_whole_pairs_elsewhere_and_catch_a_liar_reporting_no_difference(tmp_path: Path) -> None:
    """Adversarial: beside two honest workers, every pair the liar ran with a patch hit is replayed whole (base
    and patch trial, on one worker that ran neither); its patch claims are disputes the third worker settles
    against it, its results are run again, and the row is what the truth makes it: not a pass."""
    r = paired_repo(tmp_path)
    fleet = MockFleet(no_difference(0.95, 0.5, "liar"), ["liar", "h1", "h2"])
    result = run_request(fleet_request(r, 0.05), fleet, lambda _: None)
    row = stat_row(result)
    summary = result.card.cross_check
    assert summary is not None and summary.quarantined == ("liar",) and summary.discarded == ("liar",)
    assert row.kind is not Kind.PASS and summary.reran >= row.workers["liar"]  # both sides of its pairs again
    # Each of the liar's pairs had a patch hit or a base miss: all of them went again, both sides, to h1.
    assert ("h1", 2 * row.workers["liar"], ("liar",)) in fleet.calls


def test_with_no_worker_outside_a_pair_its_replays_leave_a_paired_row_unable_to_pass_on_the_liar(
    tmp_path: Path,
) -> None:
    """Adversarial: beside one honest worker, each disputed pair finds no third worker for the tie-break, so the
    disputed patch trials are unproven faults and the liar's no-difference pairs cannot buy the pass."""
    r = paired_repo(tmp_path)
    fleet = MockFleet(no_difference(0.95, 0.5, "liar"), ["liar", "h1"])
    result = run_request(fleet_request(r, 0.05), fleet, lambda _: None)
    row = stat_row(result)
    summary = result.card.cross_check
    assert row.kind is not Kind.PASS and summary is not None and summary.unresolved


def test_a_base_trial_whose_replay_disagrees_is_unproven_and_the_paired_row_cannot_pass(tmp_path: Path) -> None:
    """Adversarial: a liar reporting misses on the base side (a patch looks better than the base) has those
    pairs replayed whole; a base dispute gets no tie-break but leaves its base trial an unproven fault."""
    r = paired_repo(tmp_path)
    truth = rates(0.95, 0.95)

    def handler(spec: TrialSpec, fixture: bytes, worker: str) -> Observation:
        if worker == "liar" and spec.side is Side.BASE and spec.property_id == STAT:
            return Observation.of(spec, exit_code=0, image_id="sha256:mock", stdout=stdout({"tool": "refunds.cancel"}))
        return truth(spec, fixture)

    result = run_request(fleet_request(r, 0.05), MockFleet(handler, ["liar", "h1", "h2"]), lambda _: None)
    row = stat_row(result)
    assert row.kind is not Kind.PASS
    unproven = [e for e in result.card.harness_events if e.kind == "replay_unproven" and e.property_id == STAT]
    assert unproven and all(e.detail.startswith("base trial ") for e in unproven)
