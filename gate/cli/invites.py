"""`gate workers invite | invites | uninvite | admit`: servers that join with one command (gate.core.trust.invites).

    gate workers invite [--uses 10] [--expires 1h] [--prefix spot] [--broker-address HOST:PORT]
    gate workers invites
    gate workers uninvite INVITE_ID
    gate workers admit [--once]

`invite` makes an invite and its join user on the broker and prints the join token once (the book beside the
registry keeps its sha256 only); `admit` is the coordinator's admission process, which enrols joining servers
without a person and runs beside the coordinator (deploy/probegate-admit.service). Each needs the broker's
admin connection (--redis-admin-url or $PROBEGATE_REDIS_ADMIN), as `gate workers enrol` does to make a
worker's own broker user.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gate.cli.settings import settings_of
from gate.core.errors import RET_OK, UsageError

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


def add_invite_actions(actions: Any, registry: Any, admin: Any) -> None:
    """The invite actions under `gate workers` (`registry`/`admin` add --workers and --redis-admin-url)."""
    invite = actions.add_parser("invite", help="make a join token: a server joins with `gate-worker join TOKEN`")
    invite.add_argument("--uses", type=int, default=1, help="how many servers may join with it (default 1)")
    invite.add_argument("--expires", default="1h", help="how long it stays good: 30m, 1h, 2d (default 1h)")
    invite.add_argument("--prefix", default="joined", help="joined workers are named PREFIX-<key id> (default joined)")
    invite.add_argument(
        "--broker-address",
        metavar="HOST:PORT",
        help="where servers reach the broker (default: the admin URL's host and port)",
    )
    listing = actions.add_parser("invites", help="every invite: open, used, expired or revoked (no secrets)")
    uninvite = actions.add_parser("uninvite", help="revoke an invite: its token joins nobody from now on")
    uninvite.add_argument("invite_id", metavar="INVITE_ID")
    admit = actions.add_parser("admit", help="the admission process: enrol servers that join, until stopped")
    admit.add_argument("--once", action="store_true", help="handle the requests waiting now, then exit")
    for action in (invite, listing, uninvite, admit):
        registry(action)
    for action in (invite, uninvite, admit):
        admin(action)


def run_invites(args: argparse.Namespace) -> int:
    """Do one invite action; one JSON line per invite touched (the token, once, on `invite`)."""
    from gate.cli.settings import registry_of
    from gate.io.invites import invites_path, load_invites

    registry = registry_of(args)
    book_path = invites_path(registry)
    if args.action == "invites":
        now = datetime.now(UTC)
        for invite in load_invites(book_path).invites:
            print(json.dumps(_row(invite, now)))
        return RET_OK
    admin = args.redis_admin_url or settings_of(args).redis_admin
    if not admin:
        raise UsageError("needs the broker's admin connection", field="--redis-admin-url (or $PROBEGATE_REDIS_ADMIN)")
    if args.action == "invite":
        return _invite(args, registry, admin)
    if args.action == "uninvite":
        return _uninvite(args.invite_id, registry, admin)
    return _admit(args, registry, admin)


def _invite(args: argparse.Namespace, registry: Any, admin: str) -> int:
    from gate.core.trust.invites import Invite, make_token, secret_hash
    from gate.io.invites import invites_path, load_invites, save_invites
    from gate.io.workers import check_registry_writable, locked
    from worker.celery.coordinator.acl import create_join_user
    from worker.celery.shared.broker import with_user
    from worker.celery.shared.joinkeys import join_user

    if args.uses < 1:
        raise UsageError("must be at least 1", field="--uses")
    if not _NAME.match(args.prefix):
        raise UsageError("a name prefix is letters, digits, '-', '_' and '.' (at most 40)", field="--prefix")
    lifetime = _duration(args.expires)
    address = _address(args.broker_address) if args.broker_address else None
    check_registry_writable(registry, "--workers")
    now = datetime.now(UTC)
    invite_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    invite = Invite(
        invite_id=invite_id,
        secret_sha256=secret_hash(secret),
        prefix=args.prefix,
        uses=args.uses,
        expires_at=now + lifetime,
        created_at=now,
    )
    book_path = invites_path(registry)
    with locked(registry):
        book = load_invites(book_path)
        _, kept = create_join_user(admin, invite_id, invite.secret_sha256)
        save_invites(book_path, book.replace(invite))
    url = with_user(admin, join_user(invite_id), secret)
    if address is not None:
        parts = urlsplit(url)
        url = urlunsplit((parts.scheme, f"{parts.netloc.rsplit('@', 1)[0]}@{address}", *parts[2:]))
    if not kept:
        print(
            "gate: warning: the broker keeps no ACL file (redis-server's aclfile): the invite's join user lives "
            "in memory only and a restart undoes it; see deploy/README.md, 'Broker users across restarts'",
            file=sys.stderr,
        )
    print(json.dumps({**_row(invite, now), "token": make_token(url, invite_id)}))
    return RET_OK


def _uninvite(invite_id: str, registry: Any, admin: str) -> int:
    from gate.core.trust.invites import revoked
    from gate.io.invites import invites_path, load_invites, save_invites
    from gate.io.workers import locked
    from worker.celery.coordinator.acl import delete_user
    from worker.celery.shared.joinkeys import join_user

    book_path = invites_path(registry)
    now = datetime.now(UTC)
    with locked(registry):
        try:
            book = revoked(load_invites(book_path), invite_id, now)
        except KeyError:
            raise UsageError(f"no invite {invite_id!r}", file=str(book_path)) from None
        save_invites(book_path, book)  # first: the admission refuses it even if the broker is unreachable
    closed, _ = delete_user(admin, join_user(invite_id))
    invite = book.by_id(invite_id)
    assert invite is not None
    print(json.dumps({**_row(invite, now), "connections_closed": closed}))
    return RET_OK


def _admit(args: argparse.Namespace, registry: Any, admin: str) -> int:
    from worker.celery.coordinator.admitter import Admitter

    admission = Admitter(admin, registry, clock=lambda: datetime.now(UTC))
    print(f"gate: admitting join requests for {registry} (stop with Ctrl-C or SIGTERM)", file=sys.stderr, flush=True)
    try:
        while True:
            for outcome in admission.once(wait_s=0.0 if args.once else 1.0):
                print(json.dumps(outcome.row()), flush=True)
            if args.once:
                return RET_OK
    finally:
        admission.close()


def _row(invite: Any, now: datetime) -> dict[str, Any]:
    return {
        "invite": invite.invite_id,
        "state": invite.state(now),
        "prefix": invite.prefix,
        "uses": invite.uses,
        "used": len(invite.admitted),
        "admitted": list(invite.admitted),
        "expires_at": invite.expires_at.isoformat(),
        "revoked_at": invite.revoked_at.isoformat() if invite.revoked_at else None,
    }


def _duration(text: str) -> timedelta:
    found = _DURATION.match(text.strip())
    if not found or int(found[1]) < 1:
        raise UsageError(f"not a duration like 30m, 1h or 2d: {text!r}", field="--expires")
    return timedelta(seconds=int(found[1]) * _UNITS[found[2]])


def _address(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c in host for c in "/@?# "):
        raise UsageError(f"not a HOST:PORT: {text!r}", field="--broker-address")
    return text
