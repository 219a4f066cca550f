"""Statistical replays through real Redis, real `gate-worker serve` processes and real Docker: an enrolled
stand-in that reports the expected tool on every tool-choice trial it runs, beside an honest enrolled
worker, lifts the noisy sampler's row over the band with cross-checks off, and is refused with them on,
at the default share and at 1; beside two honest workers it is caught and its results run again. Trial
seeds are pinned (`NOISY_SEEDS`), so the row's true hits are 6/10."""

from __future__ import annotations

from pathlib import Path

import pytest
from gate_runs import EXAMPLE, NOISY_SEEDS, Run, gate_run
from support.servers import RedisServer, Workers, enrol, start_statistical_liar

from gate.io.artifacts import read_card
from gate.io.evidence import verified_records

pytestmark = pytest.mark.integration

STAT = "tool_choice_rate"
# Every batch of a wave sent at once round the workers: which trials of the row the stand-in gets, and so which
# of the pinned seeds' misses it can turn into hits, is then the round's alone, not the workers' speed's.
ROUND = ("--room", "0")


def noisy(tmp: Path, url: str, registry: Path, share: str, *extra: str) -> Run:
    return gate_run(
        EXAMPLE, "noisy_sampler", tmp / share / "card.json", "--broker", url, "--workers", str(registry),
        "--cross-check", share, *NOISY_SEEDS, *extra, new_ledger=True,
    )  # fmt: skip


def stat_row(run: Run) -> dict:
    return next(r for r in run.card["properties"] if r["id"] == STAT)


def refusals(run: Run) -> list[str]:
    """Accept's reasons besides the replayed seeds (the test pins them, and accept is not told so)."""
    assert run.accepted is not None, run.accept_said
    return [reason for reason in run.accepted["reasons"] if "seed" not in reason]


def fooled_then_refused(workers: Workers, registry: Path, tmp: Path, lies: str, shares: tuple[str, ...]) -> None:
    """With cross-checks off the stand-in's lies pass the row, and only the pinned seeds stand in accept's way;
    at each of `shares` its replayed lies are disputes no third worker can settle, and accept refuses the row."""
    fooled = noisy(tmp, workers.url, registry, "0", *ROUND)
    row = stat_row(fooled)
    assert set(w.split("@")[0] for w in row["workers"]) == {"box-honest", "box-liar"}, row
    assert row["kind"] == "pass" and row["hits"] >= 8, row  # the lies bought the pass
    if lies == "statistical:2":
        assert row["hits"] == 8, row  # just enough: the band and not one hit more
    assert fooled.code == 0, fooled.stderr
    assert fooled.accept != 0 and refusals(fooled) == [], fooled.accept_said  # only the pinned seeds refuse
    for share in shares:
        # The whole suite: which trials of the row the stand-in gets (and so which misses it can turn into hits)
        # follows from the batches of every property going round the workers; the row alone left that to luck.
        run = noisy(tmp, workers.url, registry, share, *ROUND)
        row = stat_row(run)
        assert row["kind"] != "pass", (share, row)
        assert run.accept != 0 and any(STAT in reason for reason in refusals(run)), run.accept_said
        summary = run.card["cross_check"]
        assert summary["replays_checked"] >= 1 and summary["unresolved"], summary
        named = {
            frozenset(s["worker"] for s in d["sides"]) for d in summary["disagreements"] if d["property_id"] == STAT
        }
        assert frozenset({"box-honest", "box-liar"}) in named, summary["disagreements"]
        assert "no_cross_check_worker" in {e["kind"] for e in run.card["harness_events"]}  # no third worker


# The noisy sampler under the pinned seeds hits 6 of 10, 2 short of the band: a liar on every trial, and one
# that turns only 2 of its misses into hits (just enough; it lies on replays too only while its budget lasts).
def test_a_stand_in_fabricating_statistical_hits_is_refused_with_replays_and_passes_without(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: with cross-checks off the stand-in's fabricated hits (on every trial, then, in its place
    under the same enrolled key, on just enough) pass the noisy sampler's row (true 6/10) and nothing but the
    pinned seeds stands in accept's way; at the default share (and at 1) its replayed lies are disputes no
    third worker can settle, so the row cannot pass and accept refuses."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "honest", "liar")
    workers.start("honest")
    start_statistical_liar(workers, "liar", "statistical")
    workers.wait_ready()
    fooled_then_refused(workers, registry, tmp_path / "every", "statistical", ("0.05", "1"))
    workers.kill("liar")  # the honest worker and the broker stay: only the liar changes
    start_statistical_liar(workers, "liar", "statistical:2")
    workers.wait_ready()
    fooled_then_refused(workers, registry, tmp_path / "just-enough", "statistical:2", ("0.05",))


def test_beside_two_honest_workers_the_stand_in_is_caught_and_its_results_run_again(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: with a third enrolled worker each dispute's tie-break reproduces the honest side, so the
    stand-in is quarantined, no result it gave still counts (replaced by a tie-break or run again on the honest
    workers), and the row is what they make it (6 of 10 under the pinned seeds: not a pass); accept refuses."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "h1", "h2", "liar")
    workers.start("h1")
    workers.start("h2")
    start_statistical_liar(workers, "liar")
    workers.wait_ready()
    # The whole suite, not the row alone: its batches go round the three workers so that the stand-in's share of
    # the row holds misses of the pinned seeds to turn into hits (the row then looks like a pass and every hit
    # but the margin is replayed). Run alone, the row's batches fell so that its one lie left the row at 7 of
    # 10: nothing to replay but the share, and the lie was found only when the share drew it.
    run = noisy(tmp_path, redis_server.url, registry, "0.05", *ROUND)
    summary = run.card["cross_check"]
    assert summary["quarantined"] == ["box-liar"] and summary["discarded"] == ["box-liar"], summary
    # Nothing the stand-in ran still counts: each result of its was replaced by a tie-break's, or (what the
    # replays left, `reran`, none when its whole share was replayed: the batches decide) run again elsewhere.
    counted = {r.observation.worker_id.split("@")[0] for r in verified_records(read_card(run.card_path), run.card_path)}
    assert counted <= {"box-h1", "box-h2"}, counted
    if summary["reran"]:
        assert "worker_discarded" in {e["kind"] for e in run.card["harness_events"]}, run.card["harness_events"]
    row = stat_row(run)
    assert (row["kind"], row["hits"]) == ("inconclusive_sample", 6), row
    assert run.accept != 0 and any(STAT in reason for reason in refusals(run)), run.accept_said
    assert not any("not evidence" in reason for reason in refusals(run))  # refused for the row, not the liar


def test_an_instant_stand_in_buys_nothing_with_the_replays_on(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Adversarial: a stand-in that answers every batch at once (each property's first trial run, the rest
    copies, every tool-choice trial a hit), so that it is dealt every turn it has room for
    (test_readiness_celery), gets the noisy sampler's row (true 6/10) no pass: its hits beyond the margin are
    replayed on the honest worker. That the replays are what stops it, whatever share of the row it drew, is
    test_replay_run's instant liar (a failing row bought in most runs with them off)."""
    registry = tmp_path / "workers.json"
    enrol(workers, registry, "honest", "liar")
    workers.start("honest")
    start_statistical_liar(workers, "liar", "instant")
    workers.wait_ready()
    run = noisy(tmp_path, workers.url, registry, "0.05")
    row = stat_row(run)
    assert row["kind"] != "pass" and row["assigned"].get("box-liar", 0) >= 1, row
    assert run.accept != 0 and any(STAT in reason for reason in refusals(run)), run.accept_said
