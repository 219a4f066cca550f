"""The site `gate view`'s unit tests look at: real cards (a clean run, the same run blocked with hostile text in
its ids and details, a card that does not parse, a file that is no card), a run in progress, a freeze file, and
the helpers that read its pages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from starlette.testclient import TestClient

from gate.core.card.card import VerdictCard
from gate.core.policy.freezes import FreezeEntry, FreezeFile
from gate.core.policy.policy import JobStatus
from gate.core.suite.journal import trial_line
from gate.core.suite.trial import Observation
from gate.core.testing import make_spec
from gate.core.verdicts.verdict import Kind
from gate.io.journal import JournalWriter
from gate.view.sources import Sources

from .html_page import Page
from .mini_suite import CONTRACT, NOW, SAFETY, STAT

# The report's tests plant these (tests/unit/core/report/test_report_html.py): each could break out of a page.
HOSTILE_PARTS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</svg><svg onload=alert(1)>",
    "</td></tr></table><style>*{}</style><a href=javascript:alert(1)>x</a>&amp;",
    "' onmouseover='alert(1)",
]
HOSTILE = " ".join(HOSTILE_PARTS)
LIVE_RUN = "run-live-0001"
SEAL = "a" * 64


@dataclass(frozen=True)
class Site:
    """What the view is serving: its folders and the cards in them."""

    cards: Path
    state: Path
    good: Path
    blocked: Path
    journal: Path
    writer: JournalWriter


def blocked_card(card: VerdictCard) -> VerdictCard:
    """The clean card, a day later, with its contract row failed on hostile output and a hostile id."""
    rows = tuple(
        row.model_copy(update={"kind": Kind.FAIL_CONTRACT, "hits": 0, "detail": f"trial 0: {HOSTILE}"})
        if row.id == CONTRACT
        else row.model_copy(update={"id": f"{row.id}{HOSTILE}"})
        if row.id == SAFETY
        else row
        for row in card.properties
    )
    return card.model_copy(
        update={
            "properties": rows,
            "run_id": "run-test-0002",
            "created_at": card.created_at + timedelta(days=1),
            "status": JobStatus.BLOCKED,
            "exit_code": 1,
            "reasons": (f"fail_contract on {CONTRACT}: {HOSTILE}",),
        }
    )


def append_trial(writer: JournalWriter, index: int) -> None:
    """One more observed trial of the statistical property in the live run's journal."""
    spec = make_spec(run_id=LIVE_RUN, property_id=STAT, trial_index=index)
    writer.append(trial_line(writer.chain, spec, Observation.of(spec, exit_code=index % 2, duration_s=0.1)))


def freeze_file() -> FreezeFile:
    entry = FreezeEntry(
        freeze_id=f"flaky-{CONTRACT}", properties=(CONTRACT,), seal=SEAL, reason=f"flickers {HOSTILE}",
        expires_at=NOW + timedelta(days=3650), owner="dana", cause="hash_seed",
    )  # fmt: skip
    unowned = entry.model_copy(update={"freeze_id": "nobody", "owner": "", "cause": ""})
    return FreezeFile(freezes=(entry, unowned))


def sources(site: Site, **given: object) -> Sources:
    return Sources(card_dirs=(site.cards,), journal_dir=site.state / "journals", freezes=freeze_file, **given)


def page(client: TestClient, url: str) -> tuple[str, Page]:
    response = client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text, Page(response.text)


def events(client: TestClient, url: str) -> list[tuple[str, str]]:
    """The events of one stream, read until it ends (the unit tests' streams last half a second)."""
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


def keys(client: TestClient) -> dict[str, str]:
    """Run id -> key, from the runs page."""
    _, parsed = page(client, "/")
    return {
        attrs["data-run"] or "": attrs["data-key"] or ""
        for tag, attrs in parsed.elements
        if tag == "tr" and "data-run" in attrs
    }
