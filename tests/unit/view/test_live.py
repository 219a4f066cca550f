"""A run in progress: its journal read without a lock or a write while the run appends, its rows streamed
as server-sent events, and the card's address sent once the run has written it."""

from __future__ import annotations

import json

from starlette.testclient import TestClient
from support.mini_suite import STAT
from support.viewsite import LIVE_RUN, Site, append_trial, events

from gate.core.verdicts.verdict import OutcomeKind
from gate.io.artifacts import read_card, write_card
from gate.io.journal import peek_journal
from gate.io.liveprogress import ProgressFile, progress_path
from gate.view.live import read_live


def test_peek_reads_a_journal_a_live_run_holds_locked(site: Site) -> None:
    """The writer's lock does not stop the view, and a torn last line is left out."""
    journal = peek_journal(site.journal)
    assert journal is not None and journal.header.run_id == LIVE_RUN and len(journal.stored) == 1
    with site.journal.open("ab") as handle:
        handle.write(b'{"torn":')
    assert len(read_live(site.journal).rows) == 3


def test_the_stream_sends_the_rows_then_the_card_once_it_exists(client: TestClient, site: Site) -> None:
    """The stream's first event is the rows as the journal holds them; once the card is written, its address."""
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
    """A key that names no journal gets one `gone` event and the stream ends."""
    assert events(client, "/live/0000000000000000/events") == [("gone", "no run in progress under this key")]


def test_what_the_checks_judged_so_far_streams_with_its_interval(client: TestClient, site: Site) -> None:
    """Beside the journal, the run's judged counts: the row shows hits, judged of planned and the hit rate
    with its Wilson interval, and the next wave's counts reach the page through the stream."""
    progress = ProgressFile(progress_path(site.journal), every_s=0)
    progress.planned(STAT, 10)
    for index, outcome in enumerate((OutcomeKind.HIT, OutcomeKind.HIT, OutcomeKind.MISS)):
        progress.done(STAT, outcome, index)
    live = read_live(site.journal)
    row = next(r for r in live.rows if r.property_id == STAT)
    assert (row.cells["judged"], row.cells["hits"], row.cells["hit_rate"]) == ("3 of 10", "2", "0.67 [0.21, 0.94]")
    progress.done(STAT, OutcomeKind.HIT, 3)
    (name, data), *_ = events(client, f"/live/{live.key}/events")
    streamed = {r["property"]: r for r in json.loads(data)["rows"]}[STAT]
    assert name == "rows" and (streamed["judged"], streamed["hits"]) == ("4 of 10", "3")


def test_a_progress_file_that_lies_shows_nothing_rather_than_breaking(site: Site) -> None:
    """More hits than judged trials (a garbled or planted file) is shown as no rate, never a traceback."""
    progress_path(site.journal).write_text(json.dumps({"properties": {STAT: {"planned": 1, "judged": 1, "hits": 9}}}))
    row = next(r for r in read_live(site.journal).rows if r.property_id == STAT)
    assert row.cells["hit_rate"] == "-"
