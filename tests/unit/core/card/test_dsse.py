"""gate.core.card.dsse: the DSSE v1 PAE and envelope verification against the specification's own test
vectors, signing round trips, and every tampered field refused."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from gate.core.card.dsse import (
    INTOTO_PAYLOAD_TYPE,
    Envelope,
    EnvelopeError,
    ResourceDescriptor,
    Signature,
    Statement,
    b64decode,
    b64encode,
    pae,
    sign,
    verified_keys,
    verify,
)
from gate.io.keys import SigningKey

# Source: secure-systems-lab/dsse, testvectors/vectors.json (commit 82043adf78bb4e67c208f9ffa72b38804ea6a0c4),
# copied byte for byte except for JSON whitespace. Keys A and B are RFC 8032 section 7.1 TEST 1 and TEST 2.
KEYS = {
    "A": (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    ),
    "B": (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
    ),
}
_STATEMENT = "eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEifQ=="
_PAE_STATEMENT = (
    "445353457631203238206170706c69636174696f6e2f766e642e696e2d746f746f2b6a736f6e203433207b225f74797065223a"
    "2268747470733a2f2f696e2d746f746f2e696f2f53746174656d656e742f7631227d"
)
_SIG_A = "2WAfaHm5jluo0w+0rk8uVkluELJYWjSmU9x7EUzx+AyteDGJ4/nqyJXfmAUVFIAoQafWm7AxBZNw5M9ixNHiCA=="
_SIG_B = "c1+67/aT0yqEpwx8PsVY3MLHsj9D0CZ014/Fv/QlG59P+9CobUZ7xECJ/V3USG0Ob9CiE5LjReEZUzNF2l7eBw=="
INTOTO = "application/vnd.in-toto+json"
# (id, payload, payloadType, signatures [(keyid or None, sig)], trustedKeys, threshold, supportedPayloadTypes,
#  pae hex, expect)
VECTORS = [
    ("single-signature", _STATEMENT, INTOTO, [("A", _SIG_A)], "A", 1, [INTOTO], _PAE_STATEMENT, "accept"),
    (
        "url-safe-base64",
        "-_-_Pj8=",
        INTOTO,
        [("A", "P-_KHICeR7tI6S_YyejJTRtrXhcQyQ2LYPaL8h90KjC9qN8HU_svOQ6TuDOT1HIrsGW886DbWNWcCmX5twLrAw==")],
        "A",
        1,
        [INTOTO],
        "445353457631203238206170706c69636174696f6e2f766e642e696e2d746f746f2b6a736f6e203520fbffbf3e3f",
        "accept",
    ),
    (
        "payload-type-swapped",
        _STATEMENT,
        "application/vnd.example.other+json",
        [("A", _SIG_A)],
        "A",
        1,
        [INTOTO, "application/vnd.example.other+json"],
        _PAE_STATEMENT,
        "reject",
    ),
    (
        "non-ascii-payload-type",
        _STATEMENT,
        "application/vnd.exämple+json",
        [("A", "xmSk/ug66ysT7ayhkCIjhAq42zgZXSsEWuzUaNL7w2eGAdF/NU6/fRXPtmfN+5DNSAs5/i2lUnHjbbjPsu0tAw==")],
        "A",
        1,
        ["application/vnd.exämple+json"],
        "445353457631203239206170706c69636174696f6e2f766e642e6578c3a46d706c652b6a736f6e203433207b225f74797065223a"
        "2268747470733a2f2f696e2d746f746f2e696f2f53746174656d656e742f7631227d",
        "accept",
    ),
    (
        "empty-payload",
        "",
        INTOTO,
        [("A", "gSggCAaTLTYyRH6FIDBem6meyIynsYy8RTHVzwx9tnTb7Bg/1jMWnuVgI/gffqmbsC2VX5/jHfkkDqsj7CDbDg==")],
        "A",
        1,
        [INTOTO],
        "445353457631203238206170706c69636174696f6e2f766e642e696e2d746f746f2b6a736f6e203020",
        "accept",
    ),
    (
        "empty-payload-type",
        _STATEMENT,
        "",
        [("A", "iC3q/+3Rm0+lpAJRueDmDh15PnwCfxKmS0NAfKsbv+zgulXQC/WM9trc+j1XEqlwDIg/vf/uNfebeD6sxInrDg==")],
        "A",
        1,
        [INTOTO],
        "445353457631203020203433207b225f74797065223a2268747470733a2f2f696e2d746f746f2e696f2f53746174656d656e742f"
        "7631227d",
        "reject",
    ),
    (
        "threshold-two-distinct-keys",
        _STATEMENT,
        INTOTO,
        [("A", _SIG_A), ("B", _SIG_B)],
        "AB",
        2,
        [INTOTO],
        _PAE_STATEMENT,
        "accept",
    ),
    (
        "threshold-two-one-key-twice",
        _STATEMENT,
        INTOTO,
        [("A", _SIG_A), ("A", _SIG_A)],
        "AB",
        2,
        [INTOTO],
        _PAE_STATEMENT,
        "reject",
    ),
    (
        "threshold-two-without-keyids",
        _STATEMENT,
        INTOTO,
        [(None, _SIG_A), (None, _SIG_B)],
        "AB",
        2,
        [INTOTO],
        _PAE_STATEMENT,
        "accept",
    ),
]


def vector_key(name: str) -> SigningKey:
    seed, public = KEYS[name]
    key = SigningKey(Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed)))
    assert key.public().raw.hex() == public
    return key


def vector_envelope(payload: str, payload_type: str, signatures: list[tuple[str | None, str]]) -> Envelope:
    """The vector's envelope, read from its JSON as a file would be (keyid omitted where the vector omits it)."""
    sigs = [{"sig": sig} | ({"keyid": keyid} if keyid else {}) for keyid, sig in signatures]
    return Envelope.from_json(
        json.dumps({"payload": payload, "payloadType": payload_type, "signatures": sigs}).encode()
    )


@pytest.mark.parametrize("vector", VECTORS, ids=[v[0] for v in VECTORS])
def test_published_vectors(vector: tuple) -> None:
    """Each DSSE test vector: our PAE equals its bytes, and verification accepts or rejects as it expects."""
    vector_id, payload, payload_type, signatures, trusted, threshold, supported, pae_hex, expect = vector
    envelope = vector_envelope(payload, payload_type, signatures)
    keys = [vector_key(name).public() for name in trusted]
    # `pae` is what the signatures cover: the envelope's own PAE, but for the vector that swaps the type.
    covered = bytes.fromhex(pae_hex)
    assert any(key.verify(b64decode(signatures[0][1]), covered) for key in keys)
    assert (pae(envelope.payload_type, envelope.body()) == covered) == (vector_id != "payload-type-swapped")
    try:
        body = verify(envelope, keys, payload_types=supported, threshold=threshold)
    except EnvelopeError:
        assert expect == "reject"
    else:
        assert expect == "accept"
        assert body == b64decode(payload)


def test_protocol_md_example_pae() -> None:
    """The PAE example of protocol.md ("Test Vectors"): hello world under http://example.com/HelloWorld."""
    assert (
        pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_signing_reproduces_the_vector_signature() -> None:
    """Ed25519 is deterministic: signing the vector's statement with key A gives the vector's envelope."""
    envelope = sign(INTOTO, b64decode(_STATEMENT), vector_key("A"))
    assert envelope.signatures[0].sig == _SIG_A
    assert envelope.signatures[0].keyid == vector_key("A").key_id
    assert envelope.payload == _STATEMENT


@given(st.text(), st.binary())
def test_pae_parses_back_to_type_and_body(payload_type: str, body: bytes) -> None:
    """PAE is injective: the type and body can be read back from its bytes by their lengths alone."""
    encoded = pae(payload_type, body)
    magic, type_len, rest = encoded.split(b" ", 2)
    assert magic == b"DSSEv1" and type_len == str(len(payload_type.encode())).encode()
    kind, rest = rest[: int(type_len)], rest[int(type_len) + 1 :]
    body_len, _, tail = rest.partition(b" ")
    assert kind.decode() == payload_type and tail == body and int(body_len) == len(body)
    assert not type_len.startswith(b"0") or type_len == b"0"


@given(st.binary())
def test_base64_round_trips_in_both_alphabets_padded_or_not(data: bytes) -> None:
    """Standard and URL-safe base64, with or without padding, decode to the same bytes."""
    standard = b64encode(data)
    urlsafe = standard.replace("+", "-").replace("/", "_")
    for text in (standard, urlsafe, standard.rstrip("="), urlsafe.rstrip("=")):
        assert b64decode(text) == data


@given(st.binary(), st.text(min_size=1))
def test_sign_verify_round_trip(body: bytes, payload_type: str) -> None:
    """An envelope signed by a key verifies with that key, for any body and type."""
    key = vector_key("B")
    envelope = Envelope.from_json(sign(payload_type, body, key).to_json())
    assert verify(envelope, [key.public()], payload_types=[payload_type]) == body


def _flip(text: str) -> str:
    raw = bytearray(b64decode(text))
    raw[len(raw) // 2] ^= 1
    return b64encode(bytes(raw))


@pytest.mark.parametrize(
    "field",
    ["payload", "payloadType", "sig", "sig-other-key", "no-signature", "sig-not-base64", "payload-not-base64"],
)
def test_every_tampered_field_is_refused(field: str) -> None:
    """A body, type or signature changed after signing, a signature by another key, none at all or an
    undecodable one: verification refuses each."""
    key = vector_key("A")
    good = sign(INTOTO, b'{"_type":"https://in-toto.io/Statement/v1"}', key)
    sig = good.signatures[0]
    tampered = {
        "payload": good.model_copy(update={"payload": _flip(good.payload)}),
        "payloadType": good.model_copy(update={"payload_type": "application/json"}),
        "sig": good.model_copy(update={"signatures": (sig.model_copy(update={"sig": _flip(sig.sig)}),)}),
        "sig-other-key": sign(INTOTO, good.body(), vector_key("B")),
        "no-signature": good.model_copy(update={"signatures": ()}),
        "sig-not-base64": good.model_copy(update={"signatures": (Signature(keyid=sig.keyid, sig="!!"),)}),
        "payload-not-base64": good.model_copy(update={"payload": "*"}),
    }[field]
    assert verify(good, [key.public()], payload_types=[INTOTO, "application/json"]) == good.body()
    with pytest.raises(EnvelopeError):
        verify(tampered, [key.public()], payload_types=[INTOTO, "application/json"])


def test_keyid_decides_nothing() -> None:
    """The keyid is an unauthenticated hint: a right signature under a wrong keyid still verifies, and a
    wrong signature under the trusted key's id does not."""
    a, b = vector_key("A"), vector_key("B")
    envelope = sign(INTOTO, b"x", a)
    lying = envelope.model_copy(update={"signatures": (envelope.signatures[0].model_copy(update={"keyid": "B"}),)})
    assert verified_keys(lying, [a.public(), b.public()]) == {a.key_id}
    forged = sign(INTOTO, b"x", b)
    claimed = forged.model_copy(update={"signatures": (forged.signatures[0].model_copy(update={"keyid": a.key_id}),)})
    assert verified_keys(claimed, [a.public()]) == frozenset()


def test_envelope_file_is_refused_when_malformed() -> None:
    """Not JSON, an unknown field or a signature without `sig` is an EnvelopeError naming the field."""
    for data in (
        b"nope",
        b'{"payload": "", "payloadType": "t", "signatures": [], "extra": 1}',
        b'{"signatures": [{}]}',
    ):
        with pytest.raises(EnvelopeError, match="not a DSSE envelope"):
            Envelope.from_json(data)


def test_statement_round_trip_and_subject_lookup() -> None:
    """A Statement serialises with the in-toto names (`_type`, `predicateType`) and reads back; a subject
    name given twice finds nothing (ambiguous), and a wrong `_type` is refused."""
    statement = Statement(
        subject=(ResourceDescriptor(name="tree", digest={"sha256": "ab"}),),
        predicate_type="urn:x",
        predicate={"a": 1},
    )
    body = statement.to_bytes()
    assert json.loads(body)["_type"] == "https://in-toto.io/Statement/v1"
    assert Statement.from_bytes(body) == statement and statement.digest("tree", "sha256") == "ab"
    twice = statement.model_copy(update={"subject": statement.subject * 2})
    assert twice.digest("tree", "sha256") is None
    with pytest.raises(EnvelopeError, match="in-toto Statement"):
        Statement.from_bytes(body.replace(b"Statement/v1", b"Statement/v0"))
    assert INTOTO_PAYLOAD_TYPE == INTOTO
