"""A run in progress: its journal read without a lock or a write while the run appends, its rows streamed
as server-sent events, and the card's address sent once the run has written it."""

from __future__ import annotations

import json

from starlette.testclient import TestClient
from support.mini_suite import STAT
from support.viewsite import LIVE_RUN, Site, append_trial

from gate.io.artifacts import read_card, write_card
from gate.io.journal import peek_journal
from gate.view.live import read_live


def events(client: TestClient, url: str) -> list[tuple[str, str]]:
    """The events of one stream, read until it ends (the test's streams last half a second)."""
    found = []
    with client.stream("GET", url) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        name = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                found.append((name, line.removeprefix("data: ")))
    return found


def test_peek_reads_a_journal_a_live_run_holds_locked(site: Site) -> None:
    """The writer's lock does not stop the view, and a torn last line is left out."""
    journal = peek_journal(site.journal)
    assert journal is not None and journal.header.run_id == LIVE_RUN and len(journal.stored) == 1
    with site.journal.open("ab") as handle:
        handle.write(b'{"torn":')
    assert len(read_live(site.journal).rows) == 3


def test_the_stream_sends_the_rows_then_the_card_once_it_exists(client: TestClient, site: Site) -> None:
    live = read_live(site.journal)
    append_trial(site.writer, 1)
    first = events(client, f"/live/{live.key}/events")
    assert first[0][0] == "rows"
    rows = {row["property"]: row for row in json.loads(first[0][1])["rows"]}
    assert rows[STAT]["trials"] == "2" and rows[STAT]["exit_0"] == "1" and rows[STAT]["exit_other"] == "1"
    # The run commits and writes its card: the stream names the card's page.
    site.writer.commit()
    card = read_card(site.good).model_copy(update={"run_id": LIVE_RUN})
    write_card(site.cards / "c" / "card.json", card)
    done = events(client, f"/live/{live.key}/events")
    assert done[-1][0] == "card" and done[-1][1].startswith("/run/")
    assert client.get(done[-1][1]).status_code == 200


def test_a_stream_of_no_run_ends_at_once(client: TestClient) -> None:
    assert events(client, "/live/0000000000000000/events") == [("gone", "no run in progress under this key")]
