"""The fleet as `gate workers status` shows it, pure: each enrolled worker's state from its heartbeat (up, gone,
or revoked whatever its heartbeat says), its load only while up, its disputes and whether it was caught from the
card's cross-check summary (unknown without a card), and the joins the open invites still allow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gate.core.trust.crosscheck import Side, WorkerDisagreement
from gate.core.trust.crosscheck_summary import summarize
from gate.core.trust.enrolment import EnrolledWorker, Roster
from gate.core.trust.fleet import Beat, fleet, invites_open
from gate.core.trust.invites import Invite, InviteBook
from gate.core.verdicts.verdict import OutcomeKind

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def worker(name: str, **fields: object) -> EnrolledWorker:
    return EnrolledWorker(name=name, key_id=name * 4, public_key="pem", enrolled_at=NOW, **fields)


def test_state_and_load_come_from_the_heartbeat_and_disputes_from_the_card() -> None:
    """An up worker shows its load; a gone one its last beat but no load; a revoked one is revoked even if it
    still beats; disputes count the disagreements naming a worker, and caught is whether it was quarantined."""
    roster = Roster(workers=(worker("up1", owned=True), worker("gone"), worker("old", revoked_at=NOW)))
    beats = {
        "up1" * 4: Beat(up=True, last_seen=NOW, in_flight=2, trials_last_minute=40),
        "gone" * 4: Beat(up=False, last_seen=NOW - timedelta(minutes=5), in_flight=3),
        "old" * 4: Beat(up=True, last_seen=NOW),
    }
    dispute = WorkerDisagreement(
        property_id="p",
        trial_index=1,
        sides=(Side(worker="gone", outcome=OutcomeKind.HIT), Side(worker="up1", outcome=OutcomeKind.MISS)),
        counted=OutcomeKind.MISS,
    )
    summary = summarize(share=0.05, seed="s", chosen=1, checked=1, disagreements=[dispute], discarded=["gone"])
    rows = {row.name: row for row in fleet(roster, beats, summary, read_card=True)}
    assert [rows[n].state for n in ("up1", "gone", "old")] == ["up", "gone", "revoked"]
    assert (rows["up1"].tier, rows["up1"].in_flight, rows["up1"].trials_last_minute) == ("owned", 2, 40)
    assert rows["gone"].in_flight is None and rows["gone"].last_seen == NOW - timedelta(minutes=5)
    assert (rows["gone"].disputes, rows["gone"].caught, rows["up1"].disputes, rows["up1"].caught) == (1, True, 1, False)
    unread = fleet(roster, beats, None, read_card=False)
    assert all(row.disputes is None and row.caught is None for row in unread)
    assert [row.name for row in unread] == ["gone", "up1", "old"]  # active ones by name, revoked ones last


def test_only_open_invites_count_and_their_joins_left() -> None:
    """Used, expired and revoked invites allow no join; open ones their uses not spent."""

    def invite(n: int, **fields: object) -> Invite:
        values: dict[str, object] = {
            "invite_id": f"{n:016x}",
            "secret_sha256": "0" * 64,
            "prefix": "p",
            "uses": 3,
            "expires_at": NOW + timedelta(hours=1),
            "created_at": NOW,
        }
        values.update(fields)
        return Invite.model_validate(values)

    book = InviteBook(
        invites=(
            invite(1, admitted=("a",)),
            invite(2, expires_at=NOW),
            invite(3, revoked_at=NOW),
            invite(4, uses=1, admitted=("b",)),
            invite(5),
        )
    )
    status = invites_open(book, NOW)
    assert (status.open, status.uses_left) == (2, 5)
