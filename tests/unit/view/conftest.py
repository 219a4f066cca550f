"""`gate view`'s application over the site tests/support/viewsite.py lays out, driven by Starlette's TestClient."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support.mini_suite import CONTRACT, SAFETY, STAT
from support.viewsite import LIVE_RUN, SEAL, Site, append_trial, blocked_card, sources

from gate.core.card.card import VerdictCard
from gate.core.suite.journal import JournalHeader
from gate.io.artifacts import write_card
from gate.io.journal import journal_path, new_journal
from gate.view.app import build_app
from gate.view.sources import Options


@pytest.fixture
def site(tmp_path: Path, card: VerdictCard) -> Iterator[Site]:
    cards = tmp_path / "cards"
    (cards / "evidence").mkdir(parents=True)
    good, blocked = cards / "a" / "card.json", cards / "b" / "card.json"
    write_card(good, card)
    write_card(blocked, blocked_card(card))
    (cards / "broken.json").write_text('{"run_id": "x", "properties": [')
    (cards / "ledger.json").write_text("{}")
    (cards / "notes.json").write_text('{"something": "else"}')
    state = tmp_path / "state"
    header = JournalHeader(
        run_id=LIVE_RUN, suite="s", checks="", tree="t", seal=SEAL, image="i", image_id="sha256:i",
        properties=(SAFETY, CONTRACT, STAT),
    )  # fmt: skip
    journal = journal_path(cards / "c" / "card.json", state)
    writer = new_journal(journal, header)
    append_trial(writer, 0)
    try:
        yield Site(cards, state, good, blocked, journal, writer)
    finally:
        writer.close()


@pytest.fixture
def client(site: Site) -> Iterator[TestClient]:
    """The view on loopback, with a short live stream so a test reading it ends."""
    app = build_app(sources(site), Options(poll_s=0.02, stream_s=0.5))
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        yield test_client
