"""The invoice example end to end on real Docker: every patch earns its kind, the card says so,
and `accept` passes only the good card. Each run goes through the `gate` console entry point.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from gate_runs import EXAMPLE, NOISY_SEEDS, PATCHES, ExampleRuns, gate_run
from run_containers import containers_of

from gate.core.errors import RET_BLOCKED, RET_HARNESS, RET_OK, RET_SAMPLER
from gate.core.verdicts.verdict import Kind

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("patch", PATCHES)
def test_every_patch_earns_the_same_kinds_with_copied_work_dirs_and_warm_interpreters(
    example_runs: ExampleRuns, patch: str
) -> None:
    """Each patch gets the same kinds and exit code in the default modes (overlay work copies, a fresh
    interpreter per trial) and with copied work dirs and warm interpreters forced, and each card says which
    modes ran, why copy did, and how many hash seeds the warm parents had."""
    run, forced = example_runs.get(patch), example_runs.get(patch, "copy+warm")
    assert (run.kinds(), run.code) == (forced.kinds(), forced.code)
    if run.card["work_copy"] is None:  # no trial ran (a drifted fixture)
        assert forced.card["work_copy"] is None and forced.card["interpreter"] is None
        return
    if run.card["work_copy"] == "copy" and os.environ.get("CI") != "true":
        pytest.skip(f"this host gives no overlay work copies: {run.card['harness_events']}")
    assert (run.card["work_copy"], forced.card["work_copy"]) == ("overlay", "copy")
    events = [e["detail"] for e in forced.card["harness_events"] if e["kind"] == "work_copy"]
    assert events == ["copy mode: forced by PROBEGATE_WORK_COPY=copy"]
    assert not any(e["kind"] == "work_copy" for e in run.card["harness_events"])
    assert (run.card["interpreter"], run.card["hash_seeds"]) == ("fresh", 0)
    assert forced.card["interpreter"] == "warm" and forced.card["hash_seeds"] >= 1


@pytest.fixture
def example(tmp_path: Path) -> Path:
    dest = tmp_path / "invoice"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_good_patch_passes_and_is_accepted(example_runs: ExampleRuns) -> None:
    """The good patch passes every property, exits 0 and its card is accepted."""
    run = example_runs.get("good")
    assert set(run.kinds().values()) == {"pass"}, run.stderr
    assert (run.code, run.accept) == (RET_OK, 0)
    assert run.card["status"] == "accepted"
    assert run.card["retry_count"] == 0 and run.card["network_mode"] == "none"
    assert run.card["image_id"].startswith("sha256:")
    assert run.card["clock"]["frozen_at"].startswith("2026-03-01T00:00:00")
    stat = next(r for r in run.card["properties"] if r["band"] == "statistical")
    assert (stat["hits"], stat["trials"]) == (10, 10) and stat["interval"]["method"] == "wilson"


def test_stdout_is_one_json_line_per_property_then_the_job(example_runs: ExampleRuns) -> None:
    """Stdout holds one JSON object per property and then the job's final line."""
    lines = example_runs.get("good").lines
    assert [ln["property_id"] for ln in lines[:-1]] == [r["id"] for r in example_runs.get("good").card["properties"]]
    assert {"kind", "property_id", "fixture_digest", "trials", "hits", "detail"} <= set(lines[0])
    assert lines[-1]["job"] == "accepted" and lines[-1]["exit_code"] == 0


@pytest.mark.parametrize("patch", PATCHES)
def test_run_forecasts_what_accept_decides_for_every_patch(example_runs: ExampleRuns, patch: str) -> None:
    """`gate run`'s job line says what `gate accept` will decide, by the one accept path: for every patch of
    the example the forecast and accept's own answer (decision and reasons) are the same."""
    run = example_runs.get(patch)
    job = run.lines[-1]
    assert run.accepted is not None, run.stderr
    forecast = {"accepted": job["accepted"], "reasons": job["accept_reasons"]}
    assert forecast == {"accepted": run.accepted["accepted"], "reasons": run.accepted["reasons"]}


def test_unmapped_write_is_fail_safety(example_runs: ExampleRuns) -> None:
    """A patch that writes outside the write map fails safety, naming the file, and is blocked."""
    run = example_runs.get("unsafe_write")
    assert run.kinds()["no_unmapped_write"] == "fail_safety"
    row = next(r for r in run.card["properties"] if r["id"] == "no_unmapped_write")
    assert "/work/.cache/last-invoice.json" in row["detail"]
    assert (run.code, run.accept) == (RET_BLOCKED, 1)


def test_leaked_token_is_fail_safety(example_runs: ExampleRuns) -> None:
    """A patch that dumps its environment to stderr leaks the trial's canary: fail_safety, blocked."""
    run = example_runs.get("leaks_token")
    assert run.kinds()["no_secret_in_output"] == "fail_safety"
    assert run.kinds()["no_unmapped_write"] == "pass"
    assert (run.code, run.accept) == (RET_BLOCKED, 1)
    assert "API_TOKEN" not in run.stdout  # the card and the JSON lines never carry the secret itself


def test_half_up_rounding_is_fail_contract(example_runs: ExampleRuns) -> None:
    """Rounding the tie half-up misses the half-even total by a cent: fail_contract, blocked."""
    run = example_runs.get("half_up_rounding")
    assert run.kinds()["invoice_total_half_even"] == "fail_contract"
    assert run.kinds()["json_shape_v3"] == "pass"
    assert (run.code, run.accept) == (RET_BLOCKED, 1)


def test_crashing_probe_is_the_patch_not_the_harness(example_runs: ExampleRuns) -> None:
    """A probe that exits non-zero fails the contracts that need its output; no harness_error."""
    run = example_runs.get("crashes")
    assert run.kinds()["invoice_total_half_even"] == "fail_contract"
    assert "harness_error" not in run.kinds().values()
    assert run.code == RET_BLOCKED and run.card["ledger_actions"] == []


def test_hang_is_inconclusive_timeout_and_not_accepted(example_runs: ExampleRuns) -> None:
    """A probe that ignores SIGTERM and loops times out: inconclusive, exit 0, accept refuses."""
    run = example_runs.get("hangs")
    assert run.kinds()["invoice_total_half_even"] == "inconclusive_timeout"
    assert run.kinds()["tool_choice_rate"] == "pass"
    assert run.code == RET_OK and run.card["status"] == "inconclusive"
    assert run.accept == 1


def test_noisy_sampler_is_inconclusive_sample(example_runs: ExampleRuns) -> None:
    """Tie-breaking at random, drawn from the replayed seeds, lands 6 of 10 hits, below the 8-of-10 band."""
    run = example_runs.get("noisy_sampler")
    row = next(r for r in run.card["properties"] if r["id"] == "tool_choice_rate")
    assert (row["kind"], row["hits"], row["trials"]) == ("inconclusive_sample", 6, 10)
    assert run.card["seeds_from"] == NOISY_SEEDS[1]
    assert row["interval"]["low"] < 0.6 < row["interval"]["high"]
    assert run.code == RET_OK and run.accept == 1


def test_drifted_fixture_is_harness_error_naming_the_file(example_runs: ExampleRuns) -> None:
    """A retuned fixture breaks the seal: harness_error naming the file, exit 2, accept refuses."""
    run = example_runs.get("drifted_fixture")
    assert set(run.kinds().values()) == {"harness_error"}
    assert all("invoices/inv-002-tie.json" in r["detail"] for r in run.card["properties"])
    assert all(r["trials"] == 0 for r in run.card["properties"])  # nothing ran
    assert (run.code, run.accept) == (RET_HARNESS, 1)


def test_all_six_kinds_appear_across_the_example(example_runs: ExampleRuns) -> None:
    """The example patches between them produce every verdict kind."""
    seen = {kind for run in example_runs.all().values() for kind in run.kinds().values()}
    assert seen == {kind.value for kind in Kind}


@pytest.mark.parametrize("patch", PATCHES)
def test_no_container_outlives_the_runs(example_runs: ExampleRuns, patch: str, docker_client) -> None:
    """After every example run, no container labelled with its run id remains."""
    run = example_runs.get(patch)
    assert containers_of(docker_client, run.card["run_id"])() == []


def test_retries_are_recorded_and_refused(example: Path, tmp_path: Path, sandbox_image: str) -> None:
    """--retries 1 runs once, records retry_count 1 on the card, and accept refuses it."""
    run = gate_run(example, "good", tmp_path / "card.json", "--retries", "1", new_ledger=True)
    assert run.card["retry_count"] == 1 and run.code == RET_OK
    assert run.accept == 1


def test_oracle_edit_is_on_the_card_and_refused(example: Path, tmp_path: Path, sandbox_image: str) -> None:
    """A patch that edits probe.py lists it in new_oracle_edits and accept refuses."""
    probe = example / "patches" / "crashes" / "probe.py"
    probe.write_text(probe.read_text() + "\n# the patch grades itself\n")
    run = gate_run(example, "crashes", tmp_path / "card.json", new_ledger=True)
    assert run.card["new_oracle_edits"] == ["app/probe.py"]
    assert run.accept == 1
    # One answer: the run itself ends blocked and says why, never "accepted" with no reason.
    assert (run.code, run.lines[-1]["job"]) == (1, "blocked")
    assert run.lines[-1]["reasons"][0] == "the patch edits oracle files: app/probe.py"


def test_sampler_budget_trips_with_exit_3(example: Path, tmp_path: Path, sandbox_image: str) -> None:
    """With a window of 5 allowing 1 inconclusive, the second noisy run fails the job with exit 3."""
    suite = example / "gate.toml"
    suite.write_text(
        suite.read_text().replace(
            'freeze_file = "flake-freeze.json"',
            'freeze_file = "flake-freeze.json"\nsampler = { window = 5, max_inconclusive = 1 }',
        )
    )
    first = gate_run(example, "noisy_sampler", tmp_path / "card.json", *NOISY_SEEDS, new_ledger=True)
    second = gate_run(example, "noisy_sampler", tmp_path / "card.json", *NOISY_SEEDS)
    assert first.code == RET_OK
    assert second.code == RET_SAMPLER and second.card["status"] == "sampler_budget_exceeded"
    assert json.loads((tmp_path / "ledger.json").read_text())["sampler_window"] == [True, True]


def _without_safety(suite: Path, extra: str = "") -> None:
    text = suite.read_text()
    for safety in ("no_unmapped_write", "no_secret_in_output"):
        start = text.index(f'[[property]]\nid = "{safety}"')
        end = text.index("[[property]]", start + 1)
        text = text[:start] + text[end:]
    suite.write_text(text.replace('freeze_file = "flake-freeze.json"', f'freeze_file = "flake-freeze.json"{extra}'))


def test_drift_on_every_property_is_a_broken_harness_without_credits(example: Path, tmp_path: Path) -> None:
    """Drift faults every property: more than a quarter of them, so the harness is broken (exit 2) and no
    credit is drawn, even on a fresh ledger."""
    _without_safety(example / "gate.toml")
    run = gate_run(example, "drifted_fixture", tmp_path / "card.json", new_ledger=True)
    assert (run.code, run.card["ledger_actions"], run.accept) == (RET_HARNESS, [], 1)
    assert any("a broken harness draws no credits" in r for r in run.card["reasons"])


def test_harness_credits_run_out_with_exit_2(example: Path, tmp_path: Path) -> None:
    """With max_fault_share 1.0 and no safety property, drift draws a credit twice (exit 0) and then
    exhausts them (exit 2)."""
    _without_safety(example / "gate.toml", "\nledger = { max_fault_share = 1.0 }")
    codes, actions = [], []
    for i in range(3):
        run = gate_run(example, "drifted_fixture", tmp_path / "card.json", new_ledger=i == 0)
        codes.append(run.code)
        actions.append({a["action"] for a in run.card["ledger_actions"]})
        assert run.accept == 1
    assert codes == [RET_OK, RET_OK, RET_HARNESS]
    assert actions == [{"freeze_opened"}, {"freeze_consumed"}, {"freeze_exhausted"}]
