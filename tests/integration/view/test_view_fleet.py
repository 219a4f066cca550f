"""`gate view --broker`: the fleet page reads who is up from the workers' heartbeats on a real redis-server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from starlette.testclient import TestClient
from support.html_page import Page

from gate.cli.arguments import build_parser
from gate.cli.settings import GateSettings
from gate.cli.view import sources_of
from gate.core.trust.enrolment import EnrolledWorker, Roster
from gate.io.workers import save_roster
from gate.view.app import build_app
from gate.view.sources import Options
from worker.celery.shared.app import direct_queue
from worker.celery.worker.heartbeat import Heartbeat, TrialMeter

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def worker(name: str, key_id: str) -> EnrolledWorker:
    return EnrolledWorker(name=name, key_id=key_id, public_key="pem", enrolled_at=NOW)


def states(client: TestClient) -> dict[str, str]:
    page = Page(client.get("/fleet").text)
    return {a["data-worker"] or "": a["class"] or "" for t, a in page.elements if t == "tr" and "data-worker" in a}


def test_the_fleet_page_shows_who_beats_and_who_is_gone(redis_server, tmp_path: Path) -> None:
    """One enrolled worker beating is up, its load shown (batches in flight, trials a minute); the other never
    beat and is gone; a stopped beat (its key deleted) turns the first to gone on the next visit."""
    registry = tmp_path / "workers.json"
    save_roster(registry, Roster(workers=(worker("w1", "a" * 64), worker("w2", "b" * 64))))
    (tmp_path / "cards").mkdir()
    argv = ["view", "--cards", str(tmp_path / "cards"), "--workers", str(registry), "--broker", redis_server.url]
    args = build_parser().parse_args(argv)
    args.settings = GateSettings()
    meter = TrialMeter()
    meter.add(6)  # one batch of six trials taken just now
    beat = Heartbeat(redis_server.url, direct_queue("a" * 64), "w1@host", busy=lambda: 2, meter=meter)
    assert beat.beat()
    app = build_app(sources_of(args), Options())
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert states(client) == {"w1": "worker state-up", "w2": "worker state-gone"}
        html = client.get("/fleet").text
        assert 'data-field="in_flight">2</td>' in html and 'data-field="rate">6</td>' in html
        beat.stop()
        assert states(client)["w1"] == "worker state-gone"
