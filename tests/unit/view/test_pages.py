"""Each page of `gate view` over real cards: what it lists and shows, and that hostile text stays text."""

from __future__ import annotations

from urllib.parse import quote

from starlette.testclient import TestClient
from support.html_page import Page
from support.mini_suite import CONTRACT, SAFETY, STAT
from support.viewsite import HOSTILE, HOSTILE_PARTS, LIVE_RUN, Site, keys, page

# Every element the view's templates and the report's builder emit: anything else was smuggled in by a card.
EMITTED = {
    "html", "head", "meta", "title", "link", "body", "nav", "a", "form", "input", "button", "main", "h1", "h2",
    "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "svg", "g", "text", "line", "circle",
    "polyline", "section", "details", "summary", "div", "span", "label", "select", "option", "pre", "script",
}  # fmt: skip


def assert_inert(parsed: Page) -> None:
    """No element but those the view emits, no handler attribute, and the one script is the view's own file."""
    assert set(parsed.tags) <= EMITTED, set(parsed.tags) - EMITTED
    for tag, attrs in parsed.elements:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "script":
            assert attrs == {"src": "/static/live.js"}
        assert not any((value or "").lower().startswith("javascript:") for value in attrs.values())


def test_runs_lists_every_card_newest_first_and_an_unreadable_one_as_a_row(client: TestClient, site: Site) -> None:
    html, parsed = page(client, "/")
    rows = [attrs for tag, attrs in parsed.elements if tag == "tr" and "data-key" in attrs]
    assert [attrs.get("data-run") for attrs in rows if "data-run" in attrs] == ["run-test-0002", "run-test-0001"]
    assert [attrs.get("data-status") for attrs in rows if "data-run" in attrs] == ["blocked", "accepted"]
    unreadable = [attrs for attrs in rows if attrs.get("class") == "unreadable"]
    assert len(unreadable) == 1 and "broken.json: not a readable card" in html
    assert "notes.json" not in html and "ledger.json" not in html  # not cards: not listed
    assert "fail_contract 1" in "".join(parsed.text)
    assert "run-live" in html and "/live/" in html  # the run in progress, above the cards
    assert_inert(parsed)


def test_runs_filter_by_suite_status_and_property(client: TestClient) -> None:
    assert list(keys_of(client, "/?status=blocked")) == ["run-test-0002"]
    assert list(keys_of(client, f"/?property={STAT}")) == ["run-test-0002", "run-test-0001"]
    assert list(keys_of(client, f"/?property={SAFETY}")) == ["run-test-0001"]  # the other card renamed it
    assert list(keys_of(client, "/?suite=nope")) == []


def keys_of(client: TestClient, url: str) -> list[str]:
    _, parsed = page(client, url)
    return [attrs["data-run"] or "" for tag, attrs in parsed.elements if tag == "tr" and "data-run" in attrs]


def test_a_run_shows_the_report_with_hostile_text_as_text(client: TestClient) -> None:
    key = keys(client)["run-test-0002"]
    html, parsed = page(client, f"/run/{key}")
    assert 'id="status" data-status="blocked"' in html
    assert {"rates", "durations", "properties"} <= {attrs.get("id") for _, attrs in parsed.elements}
    text = "".join(parsed.text)
    for part in HOSTILE_PARTS:
        assert part in text, part
    assert_inert(parsed)


def test_an_unreadable_card_is_one_line_not_a_traceback(client: TestClient, site: Site) -> None:
    _, parsed = page(client, "/")
    key = next(a["data-key"] for t, a in parsed.elements if t == "tr" and a.get("class") == "unreadable")
    html, _ = page(client, f"/run/{key}")
    assert 'id="note"' in html and "Traceback" not in html
    assert client.get("/run/0000000000000000").status_code == 404


def test_compare_shows_the_row_that_changed_kind_first(client: TestClient) -> None:
    found = keys(client)
    _, parsed = page(client, f"/compare?a={found['run-test-0001']}&b={found['run-test-0002']}")
    changed = [a for t, a in parsed.elements if t == "tr" and "changed-kind" in (a.get("class") or "")]
    assert [a["data-property"] for a in changed] == [CONTRACT]
    first = next(a for t, a in parsed.elements if t == "tr" and "change" in (a.get("class") or "").split())
    assert first["data-property"] == CONTRACT
    rates = {a["data-property"]: a for t, a in parsed.elements if t == "g" and a.get("class") == "compare-row"}
    assert rates[STAT]["data-rate-a"] == rates[STAT]["data-rate-b"]
    assert f"only in B: {SAFETY}{HOSTILE}" in "".join(parsed.text)
    assert_inert(parsed)


def test_compare_without_two_runs_says_to_pick_them(client: TestClient) -> None:
    html, _ = page(client, "/compare")
    assert "pick two runs" in html


def test_a_property_over_time(client: TestClient) -> None:
    _, parsed = page(client, f"/property?id={quote(CONTRACT)}")
    runs = [a for t, a in parsed.elements if t == "g" and "run" in (a.get("class") or "").split()]
    assert [a["data-kind"] for a in runs] == ["pass", "fail_contract"]  # oldest first
    assert "flaky-invoice_total: active, owner dana" in "".join(parsed.text)
    assert_inert(parsed)


def test_a_hostile_property_id_is_text_in_its_page(client: TestClient) -> None:
    _, parsed = page(client, f"/property?id={quote(SAFETY + HOSTILE)}")
    assert SAFETY + HOSTILE in "".join(parsed.text)
    assert_inert(parsed)


def test_flakes_lists_freezes_with_owner_expiry_and_cause(client: TestClient) -> None:
    _, parsed = page(client, "/flakes")
    rows = {a["data-freeze"]: a for t, a in parsed.elements if t == "tr" and "data-freeze" in a}
    assert rows["flaky-invoice_total"]["class"] == "freeze state-active"
    assert rows["nobody"]["class"] == "freeze state-no-owner"
    text = "".join(parsed.text)
    assert "dana" in text and "hash_seed" in text and HOSTILE_PARTS[0] in text
    assert_inert(parsed)


def test_fleet_without_a_registry_says_so(client: TestClient) -> None:
    html, _ = page(client, "/fleet")
    assert "no worker registry given" in html


def test_live_page_shows_the_journal_rows(client: TestClient, site: Site) -> None:
    html, parsed = page(client, "/")
    link = next(a["href"] for t, a in parsed.elements if t == "a" and (a.get("href") or "").startswith("/live/"))
    html, parsed = page(client, link)
    rows = {a["data-property"]: a for t, a in parsed.elements if t == "tr" and "data-property" in a}
    assert list(rows) == [SAFETY, CONTRACT, STAT]
    assert f"Run {LIVE_RUN[:12]}" in html
    assert_inert(parsed)


def test_compare_shows_how_a_paired_rows_pairs_came_out_on_each_side(tmp_path, card) -> None:
    """A paired row in two runs: the compare page puts each run's discordant pairs and the test's state
    side by side (the paired differences), and says so where one run did not pair it."""
    from gate.core.verdicts.paired import PairCounts
    from gate.core.verdicts.verdict import PairedEvidence
    from gate.io.artifacts import write_card
    from gate.view.app import build_app
    from gate.view.sources import Options, Sources

    def paired(run_id: str, pairs: PairCounts | None) -> object:
        rows = tuple(
            r.model_copy(update={"paired": PairedEvidence(pairs=pairs) if pairs else None}) if r.id == STAT else r
            for r in card.properties
        )
        return card.model_copy(update={"run_id": run_id, "properties": rows})

    write_card(tmp_path / "a" / "card.json", paired("run-pair-a", PairCounts(both_pass=5, base_only=1, patch_only=4)))
    write_card(tmp_path / "b" / "card.json", paired("run-pair-b", None))
    app = build_app(Sources(card_dirs=(tmp_path,)), Options())
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        found = keys(client)
        html, parsed = page(client, f"/compare?a={found['run-pair-a']}&b={found['run-pair-b']}")
    rows = [a for t, a in parsed.elements if t == "tr" and "pairs" in (a.get("class") or "")]
    assert [(a["data-property"], a["data-side"]) for a in rows] == [(STAT, "A"), (STAT, "B")]
    assert "not paired in this run" in html and ">4</td>" in html and ">1</td>" in html


def test_fleet_names_the_disputes_of_the_newest_card_and_the_open_invites(tmp_path, card) -> None:
    """With a registry and a card whose cross-checks caught a worker, the fleet page shows each worker's
    disputes on that card and who was caught there, and the invites line (none open here)."""
    from datetime import UTC, datetime

    from gate.cli.view import _fleet, _invites
    from gate.core.trust.crosscheck import Side, WorkerDisagreement
    from gate.core.trust.crosscheck_summary import summarize
    from gate.core.trust.enrolment import EnrolledWorker, Roster
    from gate.core.verdicts.verdict import OutcomeKind
    from gate.io.artifacts import write_card
    from gate.io.workers import save_roster
    from gate.view.app import build_app
    from gate.view.sources import Options, Sources

    when = datetime(2026, 12, 7, tzinfo=UTC)
    registry = tmp_path / "workers.json"
    save_roster(registry, Roster(workers=tuple(
        EnrolledWorker(name=n, key_id=n * 16, public_key="pem", enrolled_at=when) for n in ("honest", "liar")
    )))  # fmt: skip
    dispute = WorkerDisagreement(
        property_id=STAT,
        trial_index=1,
        sides=(Side(worker="liar", outcome=OutcomeKind.HIT), Side(worker="honest", outcome=OutcomeKind.MISS)),
        counted=OutcomeKind.MISS,
    )
    summary = summarize(share=0.05, seed="s", chosen=1, checked=1, disagreements=[dispute], discarded=["liar"])
    write_card(tmp_path / "cards" / "card.json", card.model_copy(update={"cross_check": summary}))
    sources = Sources(card_dirs=(tmp_path / "cards",), fleet=_fleet(registry, None), invites=_invites(registry))
    with TestClient(build_app(sources, Options()), base_url="http://127.0.0.1:8765") as client:
        html, parsed = page(client, "/fleet")
    cells = {a["data-worker"]: a for t, a in parsed.elements if t == "tr" and "data-worker" in a}
    assert set(cells) == {"honest", "liar"} and 'id="disputes-from"' in html
    assert "<td>1, caught</td>" in html and "<td>1</td>" in html
    assert "Invites: 0 open, 0 join(s) left." in html
