"""Join invites, pure: the admission rule admits an open invite's properly proven request once, and refuses a
used, expired, revoked or unknown invite, a replayed request, a request without the token's proof and one whose
signature is not its key's; tokens round-trip and a garbled one is one TokenError; a sealed grant opens only under
its key and its request."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.core.errors import TokenError
from gate.core.trust.invites import (
    Invite,
    InviteBook,
    JoinRefusal,
    JoinRequest,
    SignedJoinRequest,
    admit,
    admitted,
    make_token,
    parse_token,
    reply_info,
    request_mac,
    revoked,
    secret_hash,
)
from gate.io.keys import SigningKey
from gate.io.sealing import OpeningKey, SealError, seal
from gate.io.workers import verify_pem

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
SECRET = "s3cret-token"


def invite(uses: int = 1, **fields: object) -> Invite:
    values: dict[str, object] = {
        "invite_id": "0123456789abcdef",
        "secret_sha256": secret_hash(SECRET),
        "prefix": "spot",
        "uses": uses,
        "expires_at": NOW + timedelta(hours=1),
        "created_at": NOW,
    }
    values.update(fields)
    return Invite.model_validate(values)


def request(key: SigningKey, *, secret: str = SECRET, invite_id: str = "0123456789abcdef") -> SignedJoinRequest:
    """A join request as `gate-worker join` makes it, with `key` and knowing `secret`."""
    body = JoinRequest(
        invite_id=invite_id,
        nonce=secrets.token_hex(16),
        public_key=key.public().pem().decode(),
        seal_to=OpeningKey.generate().public_hex,
        host="box",
    )
    return SignedJoinRequest(
        request=body, signature=key.sign(body.message()).hex(), mac=request_mac(secret_hash(secret), body)
    )


def test_an_open_invite_admits_a_proven_request_once_and_names_it_by_prefix_and_key() -> None:
    """Admitted as spot-<key id>; after `admitted` the same request is a replay and the one-use invite is used."""
    key = SigningKey.generate()
    book = InviteBook(invites=(invite(),))
    signed = request(key)
    found, name = admit(book, signed, key.key_id, NOW, verify_pem)
    assert isinstance(found, Invite) and name == f"spot-{key.key_id[:8]}"
    book = book.replace(admitted(found, name, signed.request))
    assert admit(book, signed, key.key_id, NOW, verify_pem)[0] is JoinRefusal.REPLAYED
    other = SigningKey.generate()
    assert admit(book, request(other), other.key_id, NOW, verify_pem)[0] is JoinRefusal.USED
    assert book.invites[0].state(NOW) == "used" and book.invites[0].admitted == (name,)


def test_a_closed_or_unknown_invite_admits_nobody() -> None:
    """Expired (at its expiry exactly), revoked, or never made: refused, each for its own reason."""
    key = SigningKey.generate()
    signed = request(key)
    expired = InviteBook(invites=(invite(expires_at=NOW),))
    assert admit(expired, signed, key.key_id, NOW, verify_pem)[0] is JoinRefusal.EXPIRED
    gone = revoked(InviteBook(invites=(invite(uses=5),)), "0123456789abcdef", NOW)
    assert admit(gone, signed, key.key_id, NOW, verify_pem)[0] is JoinRefusal.REVOKED
    assert admit(InviteBook(), signed, key.key_id, NOW, verify_pem)[0] is JoinRefusal.UNKNOWN
    with pytest.raises(KeyError):
        revoked(InviteBook(), "0123456789abcdef", NOW)


def test_a_request_without_the_tokens_proof_or_its_keys_signature_is_refused() -> None:
    """Adversarial: a MAC under another secret (a token guessed or of another invite), a signature by another key
    than the one named (someone enrolling a key it does not hold), a request edited after signing."""
    key = SigningKey.generate()
    book = InviteBook(invites=(invite(uses=5),))
    assert admit(book, request(key, secret="guess"), key.key_id, NOW, verify_pem)[0] is JoinRefusal.BAD_MAC
    honest = request(key)
    thief = SigningKey.generate()
    stolen = honest.model_copy(update={"signature": thief.sign(honest.request.message()).hex()})
    assert admit(book, stolen, key.key_id, NOW, verify_pem)[0] is JoinRefusal.BAD_SIGNATURE
    # Another key named after signing: the MAC (made over the original) no longer holds.
    edited = honest.model_copy(update={"request": honest.request.model_copy(update={"public_key": "x"})})
    assert admit(book, edited, key.key_id, NOW, verify_pem)[0] is JoinRefusal.BAD_MAC


def test_a_token_round_trips_and_a_garbled_one_is_one_token_error() -> None:
    """The invite id and join URL come back as made; a token cut short, of another kind or naming another
    scheme is a TokenError that never echoes the secret."""
    url = "rediss://probegate-join-0123456789abcdef:pw%2F@broker.example:6380/0?ssl_cert_reqs=required"
    token = make_token(url, "0123456789abcdef")
    assert parse_token(f"  {token}\n") == ("0123456789abcdef", url)
    for bad in (token[:-5], "pgj1.", "hello", make_token("http://x/", "0123456789abcdef"), make_token(url, "short")):
        with pytest.raises(TokenError) as raised:
            parse_token(bad)
        assert "pw" not in str(raised.value)


@given(st.text(max_size=200))
def test_any_text_as_a_token_is_parsed_or_refused_with_a_token_error(text: str) -> None:
    """Whatever is pasted as a token: a (16-character id, redis URL) or a TokenError, nothing else."""
    try:
        invite_id, url = parse_token(text)
    except TokenError:
        return
    assert len(invite_id) == 16 and url.startswith(("redis://", "rediss://"))


def test_a_sealed_grant_opens_only_under_its_key_and_its_request() -> None:
    """Adversarial: another key, another request's info, or a flipped byte does not open the grant."""
    opening = OpeningKey.generate()
    sealed = seal(b'{"password": "p"}', opening.public_hex, reply_info("a" * 64))
    assert opening.open(sealed, reply_info("a" * 64)) == b'{"password": "p"}'
    for attempt in (
        lambda: OpeningKey.generate().open(sealed, reply_info("a" * 64)),
        lambda: opening.open(sealed, reply_info("b" * 64)),
        lambda: opening.open(sealed[:-1] + bytes([sealed[-1] ^ 1]), reply_info("a" * 64)),
    ):
        with pytest.raises(SealError):
            attempt()


def test_a_key_admitted_before_is_granted_again_without_spending_a_use_but_not_once_revoked() -> None:
    """A server that gave up before its grant came asks again with a fresh request: its key, admitted before,
    gets a fresh grant under the same name even though the one-use invite is used (or past its expiry), and no
    use is spent; once the invite is revoked it is refused like anyone."""
    key = SigningKey.generate()
    first = request(key)
    found, name = admit(InviteBook(invites=(invite(),)), first, key.key_id, NOW, verify_pem)
    assert isinstance(found, Invite)
    book = InviteBook(invites=(admitted(found, name, first.request),))
    again = request(key)
    later = NOW + timedelta(hours=2)
    found, same = admit(book, again, key.key_id, later, verify_pem)
    assert isinstance(found, Invite) and same == name
    assert admitted(found, same, again.request).admitted == (name,)
    gone = revoked(book, found.invite_id, later)
    assert admit(gone, request(key), key.key_id, later, verify_pem)[0] is JoinRefusal.REVOKED
