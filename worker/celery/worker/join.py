"""`gate-worker join TOKEN`: a new server asks, through the broker, to be enrolled, and gets its own broker user.

The token names an invite and carries the broker URL of that invite's join user, which may push a join request
and take a reply and nothing else (worker.celery.coordinator.acl.join_rules). The server signs the request with
its own result-signing key (so the coordinator enrols the key the server holds), proves the token with a MAC, and
names a one-use X25519 key the reply is sealed to (gate.core.trust.invites, gate.io.sealing). The coordinator's
admission answers with the new broker user's name and password, sealed, or with why it refused.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

import redis

from gate.core.errors import BrokerError, TokenError
from gate.core.trust.invites import (
    JoinRequest,
    SignedJoinRequest,
    parse_token,
    reply_info,
    request_mac,
    secret_hash,
)
from gate.io.keys import SigningKey
from gate.io.sealing import OpeningKey, SealError
from worker.celery.shared.broker import with_user
from worker.celery.shared.joinkeys import reply_key, request_list

POLL_S = 0.5  # how often the joining server asks for its reply


def join_request(token: str, key: SigningKey, opening: OpeningKey, host: str) -> tuple[str, SignedJoinRequest]:
    """(the join user's broker URL, the signed request) for `token`, made with `key` and sealed-to `opening`."""
    invite_id, url = parse_token(token)
    secret = unquote(urlsplit(url).password or "")
    request = JoinRequest(
        invite_id=invite_id,
        nonce=secrets.token_hex(16),
        public_key=key.public().pem().decode(),
        seal_to=opening.public_hex,
        host=host[:200],
    )
    signed = SignedJoinRequest(
        request=request, signature=key.sign(request.message()).hex(), mac=request_mac(secret_hash(secret), request)
    )
    return url, signed


def join(
    token: str, key: SigningKey, host: str, *, wait_s: float, note: Callable[[str], None] = lambda line: None
) -> tuple[str, str]:
    """Ask to be enrolled under `token`; (the name enrolled, this worker's own broker URL). TokenError when the
    broker or the coordinator refuses; BrokerError when no reply comes within `wait_s`."""
    opening = OpeningKey.generate()
    url, signed = join_request(token, key, opening, host)
    digest = signed.request.digest()
    client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=10)
    try:
        _send(client, signed)
        note(f"join request {digest[:16]} sent; waiting up to {wait_s:.0f}s for the coordinator's admission")
        reply = _wait(client, digest, wait_s)
    finally:
        client.close()
    if "refused" in reply:
        raise TokenError(f"the coordinator refused this join: {reply['refused']}: {reply.get('detail', '')}")
    try:
        sealed = base64.b64decode(reply.get("granted", ""), validate=True)
        grant = json.loads(opening.open(sealed, reply_info(digest)))
        name, user, password = grant["name"], grant["user"], grant["password"]
    except (binascii.Error, SealError, ValueError, KeyError, TypeError):
        raise TokenError("the join reply does not open under this server's key: not the coordinator's") from None
    return name, with_user(url, user, password)


def _send(client: redis.Redis, signed: SignedJoinRequest) -> None:
    try:
        client.rpush(request_list(signed.request.invite_id), signed.model_dump_json())
    except (redis.exceptions.AuthenticationError, redis.exceptions.NoPermissionError):
        raise TokenError("the broker refused this token: its invite is used, expired or revoked") from None
    except redis.exceptions.RedisError as exc:
        raise BrokerError(f"sending the join request: {exc}") from None


def _wait(client: redis.Redis, digest: str, wait_s: float) -> dict[str, str]:
    give_up = time.monotonic() + wait_s
    while True:
        try:
            raw = client.getdel(reply_key(digest))
        except (redis.exceptions.AuthenticationError, redis.exceptions.NoPermissionError):
            raise TokenError("the broker refused this token while waiting: its invite was closed (revoked)") from None
        except redis.exceptions.RedisError as exc:
            raise BrokerError(f"waiting for the join reply: {exc}") from None
        if raw is not None:
            try:
                reply = json.loads(raw)
            except ValueError:
                reply = None
            if not isinstance(reply, dict):
                raise TokenError("the join reply is not one the coordinator writes")
            return reply
        if time.monotonic() >= give_up:
            raise BrokerError(
                f"no admission answered within {wait_s:.0f}s: is `gate workers admit` running on the coordinator?"
            )
        time.sleep(POLL_S)
