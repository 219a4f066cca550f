"""Cross-checks through real Redis, real `gate-worker serve` processes and real Docker: a stand-in worker
registered under the batch task's name that fabricates clean safety evidence is caught; two honest
workers give the local pool's rows; a probe whose output varies by itself quarantines nobody."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from gate_runs import EXAMPLE, UNENROLLED, ExampleRuns, Run, gate_run
from support.servers import RedisServer, Workers, enrol, start_fabricator

from worker.host.sweep import sweep_dead_workers

# The honest fleet's tests run on one xdist worker, so the fleet starts once per CI run.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("crosscheck_celery")]
HONEST = ("w1", "w2", "w3")
# The properties cross-checks cover (safety and contract), for a run whose assertions are all on them: at share 1
# the statistical row's ten trials would also be replayed, on the honest worker, all beside the point here.
CHECKED = tuple(
    arg for prop in ("no_unmapped_write", "no_secret_in_output", "invoice_total_half_even", "json_shape_v3")
    for arg in ("--property", prop)
)  # fmt: skip

LIAR_QUEUE = "probegate.xcheck-liar"  # the run pins its primaries here, so the stand-in gets them all


def remote(patch: str, card: Path, url: str, *extra: str, example: Path = EXAMPLE) -> Run:
    """A run over the broker; without `--workers` in `extra`, of unenrolled workers (cross-checks alone)."""
    unenrolled = () if "--workers" in extra else (UNENROLLED,)
    return gate_run(example, patch, card, "--broker", url, *unenrolled, *extra, new_ledger=True)


@pytest.fixture(scope="module")
def honest_fleet(tmp_path_factory: pytest.TempPathFactory, docker_client, sandbox_image: str) -> Iterator[Workers]:
    """Three honest gate-workers on a private broker, shared by the tests that kill or quarantine none of them
    (a test may add a stand-in beside them: `with_liar` removes it again)."""
    tmp = tmp_path_factory.mktemp("honest-fleet")
    server = RedisServer(tmp)
    server.start()
    pool = Workers(server.url, tmp, env={"PROBEGATE_VISIBILITY_TIMEOUT": "8"})
    for name in HONEST:
        pool.start(name)
    pool.wait_ready()
    yield pool
    pool.stop_all()
    sweep_dead_workers(docker_client)
    server.stop()


@pytest.fixture
def with_liar(honest_fleet: Workers) -> Iterator[Workers]:
    """The honest fleet plus an unsigned stand-in on LIAR_QUEUE, which is gone again after the test."""
    start_fabricator(honest_fleet, "liar", queue=LIAR_QUEUE)
    honest_fleet.wait_ready()
    yield honest_fleet
    honest_fleet.kill("liar")
    del honest_fleet.procs["liar"]


def rows(run: Run) -> list[tuple[str, str, int, int, dict]]:
    return [(r["id"], r["kind"], r["trials"], r["hits"], r["counts"]) for r in run.card["properties"]]


def refused_for(run: Run, prop: str) -> None:
    """Fail unless accept refused the run for the row `prop` failing safety (not only for covering a selection)."""
    assert run.accepted is not None, run.accept_said
    assert any(reason.startswith(f"{prop}: fail_safety") for reason in run.accepted["reasons"]), run.accept_said


def sides(run: Run) -> set[tuple[str, frozenset[str]]]:
    found = run.card["cross_check"]["disagreements"]
    return {(d["property_id"], frozenset(s["worker"].split("@")[0] for s in d["sides"])) for d in found}


def test_fabricated_safety_passes_are_caught_by_cross_checks(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: every primary goes to a stand-in that hides writes and canaries. Without cross-checks
    the unsafe patch is accepted (the stand-in really fabricates); at share 100% the honest worker's
    misses count, both patches are refused, and each disagreement names the stand-in and the honest one."""
    workers.start("honest")
    start_fabricator(workers, "liar", queue=LIAR_QUEUE)
    workers.wait_ready()
    pinned = ("--queue", LIAR_QUEUE)
    fooled = remote("unsafe_write", tmp_path / "off" / "card.json", redis_server.url, *pinned, "--cross-check", "0")
    assert (fooled.code, fooled.accept) == (0, 0), fooled.stderr  # what the issue saw before cross-checks
    # The leak needs only its own property run: every safety and contract trial's cross-check is proven on the
    # unsafe write's run of them all.
    for patch, prop, only, checked in (
        ("unsafe_write", "no_unmapped_write", CHECKED, 4),
        ("leaks_token", "no_secret_in_output", ("--property", "no_secret_in_output"), 1),
    ):
        run = remote(patch, tmp_path / patch / "card.json", redis_server.url, *pinned, "--cross-check", "1", *only)
        assert run.kinds()[prop] == "fail_safety", (patch, run.card["properties"])
        assert run.code == 1 and run.accept != 0, run.stderr
        refused_for(run, prop)
        assert (prop, frozenset({"liar", "honest"})) in sides(run)
        row = next(r for r in run.card["properties"] if r["id"] == prop)
        assert [w.split("@")[0] for w in row["workers"]] == ["liar"]  # the primary ran on the stand-in
        assert run.card["cross_check"]["checked"] == checked  # every safety and contract trial run ran again
        # Only two workers: no tie-break, so nobody is quarantined, and the card says there was no third.
        assert run.card["cross_check"]["quarantined"] == []
        assert "no_cross_check_worker" in {e["kind"] for e in run.card["harness_events"]}


def test_an_enrolled_stand_in_signing_its_fabrications_is_caught_by_cross_checks(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: the stand-in signs its fabricated passes with a key the operator enrolled, so its
    results are taken; at share 100% the honest enrolled worker's cross-checks still refuse the patch,
    the disagreement names both by their enrolled names, and with it alone no safety row passes."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "honest", "liar")
    workers.start("honest")
    start_fabricator(workers, "liar", queue=LIAR_QUEUE, signed=True)
    workers.wait_ready()
    pinned = ("--queue", LIAR_QUEUE, "--workers", str(registry))
    run = remote("unsafe_write", tmp_path / "card.json", redis_server.url, *pinned, "--cross-check", "1", *CHECKED)
    assert run.kinds()["no_unmapped_write"] == "fail_safety", run.card["properties"]
    assert run.code == 1 and run.accept != 0, run.stderr
    refused_for(run, "no_unmapped_write")
    assert ("no_unmapped_write", frozenset({"box-liar", "box-honest"})) in sides(run)
    row = next(r for r in run.card["properties"] if r["id"] == "no_unmapped_write")
    assert list(row["workers"]) == ["box-liar"]  # its signed primaries were taken, under its enrolled name
    refusals = {"unsigned_result", "unknown_worker_key", "forged_result"}
    assert not refusals & {e["kind"] for e in run.card["harness_events"]}
    workers.kill("honest")
    safety = ("no_unmapped_write", "no_secret_in_output")  # the rows a lone liar must not pass: only they run
    only = [arg for prop in safety for arg in ("--property", prop)]
    alone = remote("unsafe_write", tmp_path / "alone" / "card.json", redis_server.url, *pinned, "--cross-check", "1",
                   *only)  # fmt: skip
    assert "pass" not in {alone.kinds()[p] for p in safety}, alone.card
    assert alone.accepted is not None and any(r.startswith(safety) for r in alone.accepted["reasons"]), (
        alone.accept_said
    )  # refused for the rows, not (only) for a partial run
    assert "cross_check_missing" in {e["kind"] for e in alone.card["harness_events"]}


def test_a_third_honest_worker_quarantines_the_stand_in(with_liar: Workers, tmp_path: Path) -> None:
    """Adversarial: with honest workers besides the stand-in, each disputed trial goes to a third worker
    twice; it reproduces the honest facts, so the stand-in is quarantined and accept refuses."""
    pinned = ("--queue", LIAR_QUEUE, "--cross-check", "1", *CHECKED)
    run = remote("unsafe_write", tmp_path / "card.json", with_liar.url, *pinned)
    summary = run.card["cross_check"]
    assert [w.split("@")[0] for w in summary["quarantined"]] == ["liar"], summary
    settled = [s for s in summary["settlements"] if s["property_id"] == "no_unmapped_write"]
    assert settled and settled[0]["settled"] == "quarantine"
    judges = {settled[0]["sided_with"].split("@")[0], settled[0]["tie_breaker"].split("@")[0]}
    assert len(judges) == 2 and judges <= set(HONEST), settled  # two honest workers, neither the stand-in
    assert run.kinds()["no_unmapped_write"] == "fail_safety" and run.accept != 0
    refused_for(run, "no_unmapped_write")


def test_honest_workers_give_the_local_pools_rows_at_full_share(
    honest_fleet: Workers, example_runs: ExampleRuns, tmp_path: Path
) -> None:
    """Honest workers, every safety/contract trial cross-checked: accepted, no disagreement, and the
    rows' kinds, trials, hits and counts equal the local pool's."""
    local = example_runs.get("good")
    run = remote("good", tmp_path / "celery" / "card.json", honest_fleet.url, "--cross-check", "1")
    assert (run.code, run.accept) == (0, 0), run.stderr
    assert rows(run) == rows(local)
    summary = run.card["cross_check"]
    assert (summary["checked"], summary["disagreements"], summary["quarantined"]) == (4, [], [])
    assert local.card["cross_check"]["checked"] == 0 and local.card["cross_check"]["note"].startswith("local pool")


VARYING = """

import os as _os
import sys as _sys

_render = render_invoice


def render_invoice(request, now):
    # Different on every run by itself: nothing any worker does.
    print(f"debug {_os.urandom(8).hex()}", file=_sys.stderr)
    return _render(request, now)
"""


def test_a_probe_whose_output_varies_by_itself_quarantines_no_worker(honest_fleet: Workers, tmp_path: Path) -> None:
    """Adversarial: a patch printing random bytes to stderr disagrees with itself on every worker; the
    tie-break's own reruns differ, the trials are reported nondeterministic, nobody is quarantined."""
    example = tmp_path / "example"
    shutil.copytree(EXAMPLE, example)
    shutil.copytree(example / "patches" / "good", example / "patches" / "varies")
    api = example / "patches" / "varies" / "invoicing" / "api.py"
    api.write_text(api.read_text() + VARYING)
    run = remote("varies", tmp_path / "varies" / "card.json", honest_fleet.url, "--cross-check", "1", example=example)
    summary = run.card["cross_check"]
    assert summary["quarantined"] == []
    varied = {t["property_id"] for t in summary["nondeterministic"]}
    assert {"no_unmapped_write", "no_secret_in_output", "json_shape_v3"} <= varied, summary
    assert all(d["facts"] == ["stderr"] for d in summary["disagreements"])
    assert (run.code, run.accept) == (0, 0), run.stderr
