"""Cross-checks in a whole gate run (`run_gate` over `MockFleet`, no Docker): fabricated passes are caught,
a nondeterministic patch quarantines nobody, honest fleets are accepted, the local pool checks nothing."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.mini_suite import SAFETY, STAT, Suite, build_suite, run, run_request, stdout
from support.mini_suite import good as good3

from gate.core.card.card import accept
from gate.core.suite.trial import FileChange, Observation, TrialSpec
from gate.core.trust.crosscheck import Settled
from gate.core.verdicts.verdict import Kind
from gate.io.artifacts import read_card
from gate.run.crosscheck import LOCAL_NOTE
from gate.run.executors.mock import MockFleet
from gate.run.request import RunResult

SECRET = "no_secret"
SECRET_PROPERTY = f"""
[[property]]
id = "{SECRET}"
band = "safety"
fixture = "invoices/inv-001.json"
check = "builtin:no_secret_in_output"
deadline_s = 2.0
"""


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    """The three-band mini suite plus a canary property, cross-checking every safety/contract trial."""
    built = build_suite(tmp_path)
    toml = built.request.suite
    toml.write_text(toml.read_text() + SECRET_PROPERTY)
    return replace(built, request=replace(built.request, cross_check=1.0))


def good(spec: TrialSpec, fixture: bytes) -> Observation:
    """The mini suite's well-behaved probe, which also keeps its canary to itself."""
    if spec.property_id == SECRET:
        return Observation.of(spec, exit_code=0, stdout=stdout({}), image_id="sha256:mock")
    return good3(spec, fixture)


def fleet_run(suite: Suite, fleet: MockFleet) -> RunResult:
    return run_request(suite.request, fleet, lambda _: None)


def kinds(result: RunResult) -> dict[str, Kind]:
    return {row.id: row.kind for row in result.card.properties}


def unsafe(spec: TrialSpec, fixture: bytes) -> Observation:
    """The patch as it really behaves: writes outside its map, prints its canary."""
    if spec.property_id == SAFETY:
        return Observation.of(
            spec, exit_code=0, stdout=stdout({}), writes=(FileChange(path="/etc/cron.d/x", change="created"),)
        )
    if spec.property_id == SECRET:
        return Observation.of(spec, exit_code=0, stdout=stdout({"token": spec.canary}), canary_seen=True)
    return good(spec, fixture)


def lying(liar: str):
    """Honest workers report what the patch does; `liar` fabricates a clean pass for every trial."""
    return lambda spec, fixture, worker: good(spec, fixture) if worker == liar else unsafe(spec, fixture)


def test_two_honest_workers_are_accepted_with_the_kinds_hits_and_trials_of_the_local_pool(suite: Suite) -> None:
    """Every safety/contract trial is run again on the other worker, nothing disagrees, and the rows equal
    a local run's; the row says which worker ran how many trials."""
    result = fleet_run(suite, MockFleet(lambda spec, fixture, worker: good(spec, fixture), ["w1", "w2"]))
    local, _ = run(replace(suite, request=replace(suite.request, new_ledger=False)), good)
    assert result.card.exit_code == 0 and accept(result.card, result.card.fixture.seal).accepted
    shown = [(r.id, r.kind, r.trials, r.hits, r.counts) for r in result.card.properties]
    assert shown == [(r.id, r.kind, r.trials, r.hits, r.counts) for r in local.card.properties]
    summary = result.card.cross_check
    assert summary is not None and (summary.share, summary.chosen, summary.checked) == (1.0, 3, 3)
    assert summary.disagreements == () and summary.quarantined == ()
    stat = next(r for r in result.card.properties if r.id == STAT)
    assert sum(stat.workers.values()) == 10 and set(stat.workers) == {"w1", "w2"}


def test_fabricated_passes_are_caught_and_the_disagreement_names_both_workers(suite: Suite) -> None:
    """Adversarial: the worker that ran the safety trials first fabricates clean passes; the honest second
    run's misses count, so the patch that writes outside its map and leaks its canary is refused."""
    fleet = MockFleet(lying("liar"), ["liar", "honest"])
    result = fleet_run(suite, fleet)
    assert kinds(result)[SAFETY] is Kind.FAIL_SAFETY and kinds(result)[SECRET] is Kind.FAIL_SAFETY
    assert result.card.exit_code == 1 and not accept(result.card, result.card.fixture.seal).accepted
    summary = result.card.cross_check
    assert summary is not None
    named = {(d.property_id, frozenset(s.worker for s in d.sides)) for d in summary.disagreements}
    assert {(SAFETY, frozenset({"liar", "honest"})), (SECRET, frozenset({"liar", "honest"}))} <= named
    # Two workers only: no third to break the tie, so nobody is quarantined, and the card says why.
    assert summary.quarantined == ()
    assert any(e.kind == "no_cross_check_worker" for e in result.card.harness_events)


def test_a_third_worker_that_reproduces_the_honest_facts_quarantines_the_liar(suite: Suite) -> None:
    """Adversarial: with a third worker, the deterministic tie-break sides with the honest worker twice:
    the liar is quarantined on the card, every result it gave is run again elsewhere (so the rows show
    what the patch does), and accept refuses the card for the unsafe rows, not for a kept lie."""
    result = fleet_run(suite, MockFleet(lying("liar"), ["liar", "honest", "third"]))
    summary = result.card.cross_check
    assert summary is not None and summary.quarantined == ("liar",) and summary.discarded == ("liar",)
    assert all(s.sided_with == "honest" for s in summary.settlements if s.settled is Settled.QUARANTINE)
    assert kinds(result)[SAFETY] is Kind.FAIL_SAFETY and kinds(result)[SECRET] is Kind.FAIL_SAFETY
    reasons = accept(result.card, result.card.fixture.seal).reasons
    assert not any("not evidence" in r for r in reasons) and any(SAFETY in r for r in reasons)
    undiscarded = result.card.model_copy(update={"cross_check": summary.model_copy(update={"discarded": ()})})
    assert any("liar" in r and "not evidence" in r for r in accept(undiscarded, result.card.fixture.seal).reasons)
    assert read_card(suite.card).cross_check == summary  # the summary round-trips through the card file


def test_a_patch_whose_output_varies_per_run_quarantines_no_honest_worker(suite: Suite) -> None:
    """Adversarial: a probe printing a per-run value (a time, an address): every worker disagrees with
    every other on stdout, the trial is reported nondeterministic, and nobody is quarantined."""
    counter = itertools.count()

    def varying(spec: TrialSpec, fixture: bytes, worker: str) -> Observation:
        obs = good(spec, fixture)
        if spec.property_id == SAFETY:
            obs = obs.model_copy(update={"stdout": stdout({"t": next(counter)})})
        return obs

    fleet = MockFleet(varying, ["a", "b", "c"])
    result = fleet_run(suite, fleet)
    summary = result.card.cross_check
    assert summary is not None and summary.quarantined == ()
    assert [(t.property_id, t.trial_index) for t in summary.nondeterministic] == [(SAFETY, 0)]
    assert kinds(result)[SAFETY] is Kind.PASS and result.card.exit_code == 0


def test_a_worker_that_hides_a_canary_in_its_returned_heads_is_caught_without_a_cross_check(suite: Suite) -> None:
    """Adversarial: a worker returns the canary in stdout but reports canary_seen False: the coordinator's
    own search makes it a safety failure, and a harness event names that worker."""

    def hiding(spec: TrialSpec, fixture: bytes, worker: str) -> Observation:
        obs = unsafe(spec, fixture) if spec.property_id == SECRET else good(spec, fixture)
        return obs.model_copy(update={"canary_seen": False})

    request = replace(suite.request, cross_check=0.0)
    result = run_request(request, MockFleet(hiding, ["hider"]), lambda _: None)
    assert kinds(result)[SECRET] is Kind.FAIL_SAFETY
    assert [e.property_id for e in result.card.harness_events if e.kind == "canary_hidden"] == [SECRET]


def test_the_local_pool_cross_checks_nothing_and_says_so(suite: Suite) -> None:
    """An executor without run_elsewhere (the local pool's one trusted machine) runs nothing twice; the
    card's summary records the share asked for and why nothing was checked."""
    result, executor = run(suite, good)
    summary = result.card.cross_check
    assert summary is not None and summary.checked == 0 and summary.note == LOCAL_NOTE
    assert [c for c in executor.calls if c[0] == "run"] == [("run", "13")]  # one wave, no second sends
    data = json.loads(suite.card.read_text())
    assert data["cross_check"]["share"] == 1.0 and data["properties"][0]["workers"] == {"": 1}


def test_a_cross_check_share_of_zero_sends_nothing_again(suite: Suite) -> None:
    """`cross_check = 0`: no trial runs twice, even on a fleet."""
    fleet = MockFleet(lying("liar"), ["liar", "honest"])
    result = fleet_run(replace(suite, request=replace(suite.request, cross_check=0.0)), fleet)
    assert [c for c in fleet.calls if c[0] != "run"] == []
    assert result.card.cross_check is not None and result.card.cross_check.chosen == 0


def test_reports_show_the_workers_and_the_disagreement_as_inert_text(suite: Suite) -> None:
    """The Markdown and HTML reports list trials by worker and each worker_disagreement; a worker name
    with Markdown/HTML in it (workers are data) stays text; a local run's reports add no section."""
    from gate.core.report.html import render_html
    from gate.core.report.markdown import render_markdown

    hostile = "liar<b>|*x*"
    result = fleet_run(suite, MockFleet(lying(hostile), [hostile, "honest"]))
    markdown, page = render_markdown(result.card), render_html(result.card)
    assert "Workers and cross-checks" in markdown and "worker&#95;disagreement" in markdown
    assert "<b>" not in markdown and "liar&lt;b&gt;&#124;&#42;x&#42;" in markdown
    assert 'id="cross-check"' in page and "<b>" not in page.split("<body>")[1]
    local, _ = run(replace(suite, request=replace(suite.request, new_ledger=False)), good)
    assert "Workers and cross-checks" not in render_markdown(local.card)


def test_the_share_comes_from_the_suite_or_the_flag_and_must_lie_in_0_to_1(tmp_path: Path) -> None:
    """`[suite] cross_check` defaults to 0.05 and refuses a share outside 0..1; `--cross-check` likewise."""
    from gate.cli.arguments import build_parser
    from gate.core.errors import SuiteError, UsageError
    from gate.io.suite import load_suite

    built = build_suite(tmp_path)
    assert load_suite(built.request.suite).config.cross_check == 0.05
    text = built.request.suite.read_text()
    built.request.suite.write_text(text.replace('name = "tiny"', 'name = "tiny"\ncross_check = 1.5'))
    with pytest.raises(SuiteError, match="cross_check"):
        load_suite(built.request.suite)
    assert build_parser().parse_args(["run", "--cross-check", "0.25"]).cross_check == 0.25
    with pytest.raises(UsageError, match="--cross-check"):
        build_parser().parse_args(["run", "--cross-check", "1.5"])


def test_a_cross_check_answered_in_the_name_of_the_avoided_worker_counts_for_nothing(suite: Suite) -> None:
    """Adversarial: the second run comes back claiming the primary's worker: it is no check, the trial is
    not counted as checked, and a harness event says why."""

    def impostor(spec: TrialSpec, fixture: bytes, worker: str) -> Observation:
        return good(spec, fixture).model_copy(update={"worker_id": "w1"})

    result = fleet_run(suite, MockFleet(impostor, ["w1", "w2"]))
    summary = result.card.cross_check
    assert summary is not None and summary.checked == 0 and summary.chosen == 3
    assert "cross_check_same_worker" in {e.kind for e in result.card.harness_events}


def test_a_cross_checked_spec_is_the_very_spec_the_first_worker_ran(suite: Suite) -> None:
    """Nothing in a spec tells a worker it is a cross-check or a replay: same index, seed, canary, everything."""
    seen: dict[str, list[TrialSpec]] = {}

    def recording(spec: TrialSpec, fixture: bytes, worker: str) -> Observation:
        seen.setdefault(worker, []).append(spec)
        return good(spec, fixture)

    fleet_run(suite, MockFleet(recording, ["w1", "w2"]))
    by_key: dict[tuple[str, str, int], list[TrialSpec]] = {}
    for specs in seen.values():
        for spec in specs:
            by_key.setdefault(spec.key, []).append(spec)
    twice = [runs for runs in by_key.values() if len(runs) == 2]
    # At share 1 every trial ran again: the three safety/contract trials and the ten statistical ones.
    assert len(by_key) == 13 and len(twice) == 13
    assert all(first == second for first, second in twice)


def test_a_card_from_before_cross_checks_still_loads(suite: Suite) -> None:
    """A card without `cross_check` or the rows' `workers` (written before them) loads, with empty defaults."""
    from gate.core.card.card import VerdictCard

    result, _ = run(suite, good)
    data = json.loads(result.card.model_dump_json())
    del data["cross_check"]
    for row in data["properties"]:
        del row["workers"]
    old = VerdictCard.model_validate(data)
    assert old.cross_check is None and all(row.workers == {} for row in old.properties)
    assert accept(old, old.fixture.seal).accepted


class EnrolledFleet(MockFleet):
    """A MockFleet whose workers are enrolled, hence untrusted (as CeleryExecutor with a registry)."""

    untrusted_workers = True


def test_with_enrolled_workers_a_lone_liar_cannot_pass_unchecked_trials(suite: Suite) -> None:
    """With untrusted workers and no second worker to check against, the liar's fabricated passes are
    unproven faults: no safety row passes, and the card names the missing checks."""
    fleet = EnrolledFleet(lambda spec, fixture, worker: good(spec, fixture), ["liar"])
    result = fleet_run(suite, fleet)
    assert kinds(result)[SAFETY] is not Kind.PASS
    assert kinds(result)[SECRET] is not Kind.PASS
    assert any(e.kind == "cross_check_missing" for e in result.card.harness_events)
    assert not accept(result.card, result.card.fixture.seal).accepted


def test_with_enrolled_workers_a_check_answered_by_the_avoided_worker_proves_nothing(suite: Suite) -> None:
    """A liar that answers its own cross-checks (as if it took them off the other worker's queue) gains
    nothing: the answers are refused and the trials stay unproven, never passed."""

    class Thief(EnrolledFleet):
        def run_elsewhere(self, specs, inputs, avoid_workers):
            for spec in specs:
                yield self._answer(spec, inputs, "liar")

    fleet = Thief(lying("liar"), ["liar"])
    result = fleet_run(suite, fleet)
    assert kinds(result)[SAFETY] is not Kind.PASS
    assert {e.kind for e in result.card.harness_events} >= {"cross_check_same_worker", "cross_check_missing"}


def test_without_enrolment_a_missing_cross_check_leaves_the_result_as_it_was(suite: Suite) -> None:
    """Unenrolled (trusted) workers: a cross-check with no second worker is a harness event, and the honest
    single worker's passes stand."""
    fleet = MockFleet(lambda spec, fixture, worker: good(spec, fixture), ["only"])
    result = fleet_run(suite, fleet)
    assert kinds(result)[SAFETY] is Kind.PASS
    assert any(e.kind == "no_cross_check_worker" for e in fleet.events + list(result.card.harness_events))
