"""The fleet page with a live reader: who is up, and each worker's load in its own word (batches in flight,
trials a minute) from its heartbeat, said for what it is; a worker's name stays text. The heartbeats are
handed in as the broker would give them (tests/integration/view/test_view_fleet.py reads a real one)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

from starlette.testclient import TestClient
from support.html_page import Page
from support.viewsite import HOSTILE, page

from gate.cli.view import _fleet
from gate.core.trust.enrolment import EnrolledWorker, Roster
from gate.core.trust.fleet import Beat
from gate.io.workers import save_roster
from gate.view.app import build_app
from gate.view.sources import Options, Sources

NOW = datetime(2026, 12, 7, tzinfo=UTC)
BROKER = "redis://127.0.0.1:1/0"  # never dialled: the test's reader answers instead


def worker(name: str, key_id: str, *, revoked: bool = False) -> EnrolledWorker:
    return EnrolledWorker(
        name=name, key_id=key_id, public_key="pem", enrolled_at=NOW, revoked_at=NOW if revoked else None
    )


class Broker:
    """Answers heartbeats as `read_beats` does, and writes down which keys it was asked for."""

    def __init__(self, beats: Mapping[str, Beat]) -> None:
        self.beats = beats
        self.asked: list[list[str]] = []

    def __call__(self, url: str, key_ids: Collection[str]) -> dict[str, Beat]:
        self.asked.append(sorted(key_ids))
        return {key: self.beats.get(key, Beat(up=False)) for key in key_ids}


def fleet_page(tmp_path: Path, broker: Broker) -> tuple[str, Page]:
    registry = tmp_path / "workers.json"
    save_roster(registry, Roster(workers=(
        worker("busy", "a" * 64), worker(HOSTILE, "b" * 64), worker("gone", "c" * 64),
        worker("old", "d" * 64, revoked=True),
    )))  # fmt: skip
    (tmp_path / "cards").mkdir()
    sources = Sources(card_dirs=(tmp_path / "cards",), fleet=_fleet(registry, BROKER, broker), fleet_live=True)
    with TestClient(build_app(sources, Options()), base_url="http://127.0.0.1:8765") as client:
        return page(client, "/fleet")


class Loads(HTMLParser):
    """Worker name -> its row's `data-field` cells, as text (the row's `data-worker` as the browser reads it)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: dict[str, dict[str, str]] = {}
        self._row: dict[str, str] | None = None
        self._field = ""
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and "data-worker" in found:
            self._row = self.rows.setdefault(found["data-worker"] or "", {})
        elif tag == "td" and self._row is not None and found.get("data-field"):
            self._field = found["data-field"] or ""
            self._row[self._field] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._field = ""
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._field:
            self._row[self._field] += data


def test_each_up_workers_load_is_shown_and_said_for_what_it_is(tmp_path: Path) -> None:
    """A worker beating shows its batches in flight and its trials a minute in their own columns, under the
    paragraph that says what they are; a gone one shows none; only active workers' heartbeats are asked for."""
    broker = Broker({
        "a" * 64: Beat(up=True, last_seen=NOW, in_flight=2, trials_last_minute=38),
        "b" * 64: Beat(up=True, last_seen=NOW, in_flight=0, trials_last_minute=0),
        "c" * 64: Beat(up=False, last_seen=NOW - timedelta(minutes=5), in_flight=7, trials_last_minute=90),
    })  # fmt: skip
    html, parsed = fleet_page(tmp_path, broker)
    assert broker.asked == [["a" * 64, "b" * 64, "c" * 64]]
    rows = Loads(html).rows
    assert rows["busy"] == {"in_flight": "2", "rate": "38"}
    assert rows["gone"] == {"in_flight": "-", "rate": "-"}  # its last word is not its load now
    assert rows["old"] == {"in_flight": "-", "rate": "-"}
    assert parsed.by_id("load-meaning") and "the trials in the batches it took in the last minute" in html
    states = {a["data-worker"]: a["class"] for t, a in parsed.elements if t == "tr" and "data-worker" in a}
    assert states["busy"] == "worker state-up" and states["gone"] == "worker state-gone"
    assert states["old"] == "worker state-revoked"


def test_a_hostile_worker_name_stays_text_beside_its_load(tmp_path: Path) -> None:
    """A name that is markup shows as text: no element of it reaches the page, and its row's load is its own."""
    broker = Broker({"b" * 64: Beat(up=True, last_seen=NOW, in_flight=1, trials_last_minute=5)})
    html, parsed = fleet_page(tmp_path, broker)
    assert {"script", "img", "style"}.isdisjoint(parsed.tags)
    assert not any(name.startswith("on") for _, attrs in parsed.elements for name in attrs)
    assert HOSTILE in "".join(parsed.text)
    assert Loads(html).rows[HOSTILE] == {"in_flight": "1", "rate": "5"}
