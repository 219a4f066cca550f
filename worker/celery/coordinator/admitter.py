"""The admitter: the coordinator's process that enrols joining servers without a person (`gate workers admit`).

It waits on the request lists of the open invites (worker.celery.shared.joinkeys), and for each request checks
it against the invite book (gate.core.trust.invites.admit: the invite open, the token's MAC, the key's
signature, no replay), then, under the registry's lock, enrols the key exactly as `gate workers enrol
--redis-admin-url` does (its own broker user, worker.celery.coordinator.acl) and spends one use of the invite.
The new user's name and password go back sealed to the key the request named; a refusal goes back in the clear
(it holds nothing secret). A closed invite's join user is deleted once no reply of it waits to be taken.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import redis
from pydantic import ValidationError

from gate.core.trust.enrolment import EnrolledWorker, EnrolmentRefused, enrol
from gate.core.trust.invites import (
    Invite,
    InviteBook,
    JoinRefusal,
    SignedJoinRequest,
    admit,
    admitted,
    reply_info,
)
from gate.io.invites import invites_path, load_invites, save_invites
from gate.io.keys import KeyFileError, VerifyKey
from gate.io.sealing import seal
from gate.io.workers import load_roster, locked, save_roster, verify_pem
from worker.celery.coordinator.acl import acl_user, delete_user, make_worker_user
from worker.celery.shared.broker import broker_call
from worker.celery.shared.joinkeys import MAX_REQUEST_BYTES, REPLY_TTL_S, join_user, reply_key, request_list

REPLY_GRACE_S = 30.0  # a closed invite's join user outlives its last reply this long: the asker reads why


@dataclass(frozen=True)
class Outcome:
    """What became of one request: the invite it named, the name enrolled (or None) and why refused (or '')."""

    invite_id: str
    name: str | None
    refused: str = ""
    detail: str = ""

    def row(self) -> dict[str, str | None]:
        return {"invite": self.invite_id, "admitted": self.name, "refused": self.refused or None, "detail": self.detail}


class Admitter:
    """Admits the join requests of the invites beside the registry at `registry`, through the broker `admin_url`."""

    def __init__(self, admin_url: str, registry: Path, *, clock: Callable[[], datetime]) -> None:
        self.admin_url, self.registry, self.clock = admin_url, registry, clock
        self.book_path = invites_path(registry)
        self._client = redis.Redis.from_url(admin_url, socket_timeout=10, socket_connect_timeout=5)
        self._closed_users: set[str] = set()  # join users of closed invites already deleted by this process
        self._replied: dict[str, float] = {}  # invite id -> when a reply of it was last written (monotonic)

    def once(self, wait_s: float = 1.0) -> list[Outcome]:
        """Handle every request waiting now (waiting up to `wait_s` for the first), then tidy closed invites."""
        book = load_invites(self.book_path)
        lists = [request_list(i.invite_id) for i in book.invites]
        outcomes: list[Outcome] = []
        if lists:
            popped = self._pop(lists)
            if popped is None and wait_s > 0:
                with broker_call("waiting for join requests"):
                    found = self._client.blpop(lists, timeout=wait_s)
                popped = found[1] if found is not None else None
            while popped is not None:
                outcomes.append(self.handle(popped))
                popped = self._pop(lists)
        self._tidy(load_invites(self.book_path))
        return outcomes

    def _pop(self, lists: list[str]) -> bytes | None:
        """The first request waiting on any of `lists`, taken off it (None: none waits)."""
        with broker_call("reading join requests"):
            for key in lists:
                if (raw := self._client.lpop(key)) is not None:
                    return raw
        return None

    def handle(self, raw: bytes) -> Outcome:
        """Admit or refuse one request as it came off a list; the reply is written either way when it can be."""
        if len(raw) > MAX_REQUEST_BYTES:
            return Outcome("?", None, "oversized_request", f"{len(raw)} bytes")
        try:
            signed = SignedJoinRequest.model_validate_json(raw)
        except ValidationError as exc:
            return Outcome("?", None, "malformed_request", str(exc.errors()[0]["msg"])[:200])
        request = signed.request
        try:
            key = VerifyKey.from_pem(request.public_key.encode())
        except KeyFileError:
            return self._refuse(signed, JoinRefusal.BAD_SIGNATURE, "the request names no Ed25519 public key")
        with locked(self.registry):
            book, now = load_invites(self.book_path), self.clock()
            verdict = admit(book, signed, key.key_id, now, verify_pem)
            if isinstance(verdict[0], JoinRefusal):
                return self._refuse(signed, verdict[0], verdict[1])
            invite, name = verdict
            assert isinstance(invite, Invite)
            worker = EnrolledWorker(
                name=name, key_id=key.key_id, public_key=key.pem().decode(), enrolled_at=now, acl_user=acl_user(name)
            )
            roster = load_roster(self.registry, missing_ok=True)
            known = roster.by_key(key.key_id)
            if name in invite.admitted:  # the same key again: a new password for the worker it already is
                if known is None or not known.active or known.name != name:
                    return self._refuse(signed, "key_revoked", f"{name} is no longer enrolled")
            else:
                try:
                    roster = enrol(roster, worker)
                except EnrolmentRefused as exc:
                    return self._refuse(signed, "key_enrolled", str(exc))
            user, password, _ = make_worker_user(self.admin_url, name, key.key_id)
            save_roster(self.registry, roster)
            save_invites(self.book_path, book.replace(admitted(invite, name, request)))
        grant = json.dumps({"name": name, "user": user, "password": password}).encode()
        sealed = seal(grant, request.seal_to, reply_info(request.digest()))
        self._reply(request.digest(), {"granted": base64.b64encode(sealed).decode()})
        self._replied[request.invite_id] = time.monotonic()
        return Outcome(request.invite_id, name)

    def _refuse(self, signed: SignedJoinRequest, why: str, detail: str) -> Outcome:
        self._reply(signed.request.digest(), {"refused": str(why), "detail": detail})
        self._replied[signed.request.invite_id] = time.monotonic()
        return Outcome(signed.request.invite_id, None, str(why), detail)

    def _reply(self, digest: str, body: dict[str, str]) -> None:
        with broker_call("writing a join reply"):
            self._client.set(reply_key(digest), json.dumps(body), ex=REPLY_TTL_S)

    def _tidy(self, book: InviteBook) -> None:
        """Delete the join user of each closed invite once none of its grants waits to be taken and its last
        reply is REPLY_GRACE_S old (a revoked one's at once: `gate workers uninvite` deleted it already)."""
        now = self.clock()
        for invite in book.invites:
            user = join_user(invite.invite_id)
            if invite.state(now) == "open" or user in self._closed_users:
                continue
            if invite.revoked_at is None:
                # A server refused just now is still polling for why, and one granted may not have taken its grant.
                if time.monotonic() - self._replied.get(invite.invite_id, -REPLY_GRACE_S) < REPLY_GRACE_S:
                    continue
                with broker_call("looking for untaken join replies"):
                    if invite.seen and self._client.exists(*(reply_key(d) for d in invite.seen)):
                        continue
            delete_user(self.admin_url, user)
            self._closed_users.add(user)

    def close(self) -> None:
        self._client.close()
