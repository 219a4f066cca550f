"""Sequential statistics in real runs: an SPRT property stops dispatching once decided, through the
local pool and through Celery workers, and the card's trial counts prove it."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from gate_runs import EXAMPLE, NOISY_SEEDS, UNENROLLED, gate_run
from run_containers import containers_created, containers_of
from support.servers import RedisServer, Workers

pytestmark = pytest.mark.integration

SPRT = 'rule = "sprt"\np0 = 0.8\np1 = 0.6\nalpha = 0.05\nbeta = 0.05\nmax_trials = 120\nwave = 5\n'


@pytest.fixture
def sprt_example(tmp_path: Path) -> Path:
    """The invoice example with its tool-choice property switched to Wald's SPRT (cap 120)."""
    dest = tmp_path / "invoice"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    suite = dest / "gate.toml"
    suite.write_text(suite.read_text().replace("trials = 10\nmin_hits = 8\n", SPRT))
    return dest


def tool_row(card: dict) -> dict:
    return next(r for r in card["properties"] if r["id"] == "tool_choice_rate")


def sprt_stops_early(sprt_example: Path, folder: Path, *extra: str) -> None:
    """A clean patch passes after three waves and a noisy one is called below the band long before the cap."""
    good = gate_run(sprt_example, "good", folder / "good.json", *extra, new_ledger=True)
    noisy = gate_run(sprt_example, "noisy_sampler", folder / "noisy.json", *extra, *NOISY_SEEDS)
    row = tool_row(good.card)
    assert (row["kind"], row["hits"], row["trials"]) == ("pass", 15, 15)  # 11 straight hits needed; waves of 5
    assert row["rule"]["rule"] == "sprt" and row["interval"]["method"] == "wilson"
    row = tool_row(noisy.card)
    assert row["kind"] == "inconclusive_sample" and row["trials"] < 120 and row["trials"] % 5 == 0
    assert "sprt finds rate <= 0.6" in row["detail"]


@pytest.mark.kinds
def test_sprt_stops_early_through_the_local_pool(sprt_example: Path, tmp_path: Path, sandbox_image: str) -> None:
    """Through the local pool, a clean patch passes after three waves and a noisy one is called early."""
    sprt_stops_early(sprt_example, tmp_path)


def test_sprt_stops_early_through_celery(
    sprt_example: Path, tmp_path: Path, workers: Workers, redis_server: RedisServer
) -> None:
    """Through two Celery workers, a clean patch passes after three waves and a noisy one is called early."""
    workers.start("s1")
    workers.start("s2")
    workers.wait_ready()
    sprt_stops_early(sprt_example, tmp_path, "--broker", redis_server.url, UNENROLLED)


def test_a_local_run_keeps_its_containers_across_waves(sprt_example: Path, tmp_path: Path, docker_client) -> None:
    """All waves of a local gate run (six properties, three SPRT waves) are served by one container per job."""
    since = time.time()
    good = gate_run(sprt_example, "good", tmp_path / "good.json", "--jobs", "2", new_ledger=True)
    assert good.code == 0 and tool_row(good.card)["trials"] == 15
    # Before run-scoped containers each wave started its own (at least 2 per wave here).
    assert containers_created(docker_client, good.card["run_id"], since) == 2
    assert containers_of(docker_client, good.card["run_id"])() == []
