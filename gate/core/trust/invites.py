"""Join invites: what lets a new server ask to be enrolled, and the rule that admits or refuses it. Pure.

An invite is a secret the coordinator hands out as a join token (`gate workers invite`); the coordinator keeps
only its sha256, a use count, an expiry and the name prefix of the workers it admits. A joining server sends one
join request per attempt:

    b"probegate/join-request/v1\\x00" || canonical JSON of the request's fields

signed with the server's own Ed25519 key (the key it will sign results with: possession is proven) and
MAC'd with HMAC-SHA256 keyed by the invite's secret hash (knowledge of the token is proven beside the broker's
own check of the token's password). The request names an X25519 key the reply is sealed to, so the broker
credentials it carries are readable by that server alone. Each admitted request's digest is kept: the same
request sent again is refused as a replay. A used-up, expired or revoked invite admits nobody.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import TokenError
from gate.core.trust.enrolment import canonical_json

TOKEN_PREFIX = "pgj1."
REQUEST_DOMAIN = b"probegate/join-request/v1\x00"
REPLY_DOMAIN = b"probegate/join-reply/v1\x00"
_FROZEN = ConfigDict(frozen=True, extra="forbid")
_HEX64 = r"^[0-9a-f]{64}$"
_INVITE_ID = r"^[0-9a-f]{16}$"


class Invite(BaseModel):
    """One invite as the coordinator keeps it: never the secret, only its sha256."""

    model_config = _FROZEN
    invite_id: str = Field(pattern=_INVITE_ID)
    secret_sha256: str = Field(pattern=_HEX64)
    prefix: str
    uses: int = Field(ge=1)
    expires_at: datetime
    created_at: datetime
    revoked_at: datetime | None = None
    admitted: tuple[str, ...] = ()  # the names it enrolled, in order
    seen: tuple[str, ...] = ()  # digests of the requests it admitted (a replay names one of them)

    def state(self, now: datetime) -> str:
        """'open', 'used', 'expired' or 'revoked' at `now`."""
        if self.revoked_at is not None:
            return "revoked"
        if len(self.admitted) >= self.uses:
            return "used"
        return "expired" if now >= self.expires_at else "open"


class InviteBook(BaseModel):
    """Every invite made (closed ones stay, so their tokens are refused by name rather than as unknown)."""

    model_config = _FROZEN
    version: int = 1
    invites: tuple[Invite, ...] = ()

    def by_id(self, invite_id: str) -> Invite | None:
        return next((i for i in self.invites if i.invite_id == invite_id), None)

    def replace(self, invite: Invite) -> InviteBook:
        """The book with `invite` in place of the one of its id (added at the end when new)."""
        if self.by_id(invite.invite_id) is None:
            return self.model_copy(update={"invites": (*self.invites, invite)})
        swapped = tuple(invite if i.invite_id == invite.invite_id else i for i in self.invites)
        return self.model_copy(update={"invites": swapped})


class JoinRequest(BaseModel):
    """What a joining server asks: to be enrolled under `invite_id` with the key `public_key`."""

    model_config = _FROZEN
    version: int = 1
    invite_id: str = Field(pattern=_INVITE_ID)
    nonce: str = Field(pattern=r"^[0-9a-f]{32}$")
    public_key: str = Field(max_length=400)  # SubjectPublicKeyInfo PEM of its Ed25519 result-signing key
    seal_to: str = Field(pattern=_HEX64)  # raw X25519 public key (hex) the reply is sealed to
    host: str = Field(default="", max_length=200)  # the server's own word on its host name: display only

    def message(self) -> bytes:
        """The bytes signed and MAC'd (see the module docstring)."""
        return REQUEST_DOMAIN + canonical_json(self.model_dump())

    def digest(self) -> str:
        """sha256 hex of `message()`: the request's name (its reply's key, its replay check)."""
        return hashlib.sha256(self.message()).hexdigest()


class SignedJoinRequest(BaseModel):
    """A join request as it crosses the broker: the request, the key's signature and the token's MAC (hex)."""

    model_config = _FROZEN
    request: JoinRequest
    signature: str = Field(pattern=r"^[0-9a-f]{128}$")
    mac: str = Field(pattern=_HEX64)


def secret_hash(secret: str) -> str:
    """sha256 hex of a token's secret: what the coordinator keeps, and the MAC's key."""
    return hashlib.sha256(secret.encode()).hexdigest()


def request_mac(secret_sha256: str, request: JoinRequest) -> str:
    """HMAC-SHA256 of the request's message under the invite's secret hash (hex)."""
    return hmac.new(bytes.fromhex(secret_sha256), request.message(), hashlib.sha256).hexdigest()


def reply_info(request_digest: str) -> bytes:
    """The HPKE `info` a reply is sealed under: bound to the one request it answers."""
    return REPLY_DOMAIN + request_digest.encode()


class JoinRefusal(StrEnum):
    """Why a join request was refused (said to the joining server and on the admission's log)."""

    UNKNOWN = "unknown_invite"
    USED = "invite_used"
    EXPIRED = "invite_expired"
    REVOKED = "invite_revoked"
    REPLAYED = "replayed_request"
    BAD_MAC = "bad_token_proof"
    BAD_SIGNATURE = "bad_key_proof"


Verify = Callable[[str, bytes, bytes], bool]  # (public key PEM, signature, message) -> valid


def admit(
    book: InviteBook, signed: SignedJoinRequest, key_id: str, now: datetime, verify: Verify
) -> tuple[Invite, str] | tuple[JoinRefusal, str]:
    """(the invite that admits the request, the name to enrol it under: the invite's prefix and the first eight
    hex digits of `key_id`, the id of the key the request names) or (why refused, detail). A key the invite
    admitted before is admitted again, even once the invite is used or expired (never once revoked): it proved
    the key, and its server may have given up before its grant came. Nothing is changed: `admitted` records
    the grant once it happened."""
    request = signed.request
    invite = book.by_id(request.invite_id)
    if invite is None:
        return JoinRefusal.UNKNOWN, f"no invite {request.invite_id}"
    if request.digest() in invite.seen:
        return JoinRefusal.REPLAYED, f"request {request.digest()[:16]} was admitted before"
    if invite.revoked_at is not None:
        return JoinRefusal.REVOKED, f"invite {invite.invite_id} is revoked"
    if not hmac.compare_digest(request_mac(invite.secret_sha256, request), signed.mac):
        return JoinRefusal.BAD_MAC, "the request does not prove knowledge of the token"
    if not verify(request.public_key, bytes.fromhex(signed.signature), request.message()):
        return JoinRefusal.BAD_SIGNATURE, "the signature does not verify under the key it names"
    name = f"{invite.prefix}-{key_id[:8]}"
    if name in invite.admitted:
        # The same key asking again (its server gave up waiting before the grant came): a fresh grant, no use spent.
        return invite, name
    state = invite.state(now)
    if state != "open":
        return JoinRefusal(f"invite_{state}"), f"invite {invite.invite_id} is {state}"
    return invite, name


def admitted(invite: Invite, name: str, request: JoinRequest) -> Invite:
    """`invite` after granting `name` for `request`: the request's digest kept, and one use spent unless `name`
    was admitted before (the same key asking again)."""
    names = invite.admitted if name in invite.admitted else (*invite.admitted, name)
    return invite.model_copy(update={"admitted": names, "seen": (*invite.seen, request.digest())})


def revoked(book: InviteBook, invite_id: str, now: datetime) -> InviteBook:
    """The book with invite `invite_id` revoked at `now` (kept as it was if revoked before); KeyError if unknown."""
    invite = book.by_id(invite_id)
    if invite is None:
        raise KeyError(invite_id)
    return book.replace(invite.model_copy(update={"revoked_at": invite.revoked_at or now}))


def make_token(join_url: str, invite_id: str) -> str:
    """The join token: the invite's id and the broker URL of its join user (the secret is that user's password)."""
    body = json.dumps({"invite": invite_id, "url": join_url}, separators=(",", ":")).encode()
    return TOKEN_PREFIX + base64.urlsafe_b64encode(body).decode().rstrip("=")


def parse_token(token: str) -> tuple[str, str]:
    """(invite id, join URL) of a token; TokenError naming what is wrong, never echoing the secret."""
    token = token.strip()
    if not token.startswith(TOKEN_PREFIX):
        raise TokenError(f"not a probegate join token (it starts with {TOKEN_PREFIX!r})", field="TOKEN")
    body = token[len(TOKEN_PREFIX) :]
    try:
        fields = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        invite_id, url = fields["invite"], fields["url"]
    except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, TypeError):
        raise TokenError("a join token cut short or garbled (copy it whole)", field="TOKEN") from None
    if not (isinstance(invite_id, str) and len(invite_id) == 16 and isinstance(url, str)):
        raise TokenError("a join token cut short or garbled (copy it whole)", field="TOKEN")
    if not url.startswith(("redis://", "rediss://")):
        raise TokenError("a join token whose broker is not a redis:// or rediss:// URL", field="TOKEN")
    return invite_id, url
