"""DSSE v1 envelopes (secure-systems-lab/dsse: protocol.md, envelope.md) and in-toto Statement v1.

A signature covers `PAE(UTF8(payloadType), body)`, never the JSON around it, so neither the payload
type nor the body can be swapped under a valid signature. The `keyid` beside a signature is an
unauthenticated hint and decides nothing here: every signature is tried against every trusted key.
Pure: the keys are anything with `key_id`, `sign` / `verify` (gate.io.keys has the Ed25519 ones).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate.core.errors import ConfigError
from gate.core.escaping import one_line

INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
_SP = b" "


class EnvelopeError(ConfigError):
    """An envelope or statement that cannot be decoded, or whose signatures do not hold."""


class Signer(Protocol):
    @property
    def key_id(self) -> str: ...

    def sign(self, message: bytes) -> bytes: ...


class Verifier(Protocol):
    @property
    def key_id(self) -> str: ...

    def verify(self, signature: bytes, message: bytes) -> bool: ...


def pae(payload_type: str | bytes, body: bytes) -> bytes:
    """DSSEv1 pre-authentication encoding: `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, LEN
    being the ASCII decimal byte length with no leading zeros."""
    kind = payload_type.encode("utf-8") if isinstance(payload_type, str) else payload_type
    return b"DSSEv1" + _SP + str(len(kind)).encode() + _SP + kind + _SP + str(len(body)).encode() + _SP + body


def b64decode(text: str) -> bytes:
    """Standard or URL-safe base64, padded or not (verifiers MUST accept either alphabet); anything
    else is an EnvelopeError."""
    standard = text.replace("-", "+").replace("_", "/")
    standard += "=" * (-len(standard) % 4)
    try:
        return base64.b64decode(standard, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EnvelopeError(f"not base64: {exc}") from None


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Signature(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    keyid: str = ""  # a hint only (protocol.md: MUST NOT be used for security decisions)
    sig: str


class Envelope(BaseModel):
    """The JSON envelope: `payload` (base64 of the body), `payloadType`, `signatures`."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    payload: str = ""
    payload_type: str = Field(default="", alias="payloadType")
    signatures: tuple[Signature, ...] = ()

    def body(self) -> bytes:
        return b64decode(self.payload)

    def to_json(self) -> bytes:
        """The envelope as written to disk: JSON with the spec's field names, one trailing newline."""
        return (json.dumps(self.model_dump(mode="json", by_alias=True), indent=2) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> Envelope:
        return _parse(cls, data, "a DSSE envelope", "envelope")


def sign(payload_type: str, body: bytes, signer: Signer) -> Envelope:
    """An envelope holding `body` with one signature by `signer` over its PAE."""
    signature = Signature(keyid=signer.key_id, sig=b64encode(signer.sign(pae(payload_type, body))))
    return Envelope(payload=b64encode(body), payload_type=payload_type, signatures=(signature,))


def verified_keys(envelope: Envelope, trusted: Sequence[Verifier]) -> frozenset[str]:
    """The ids of the distinct trusted keys with a valid signature over the envelope's PAE. A body
    that is not base64 is an EnvelopeError; a signature that is not base64 is skipped."""
    message = pae(envelope.payload_type, envelope.body())
    accepted: set[str] = set()
    for signature in envelope.signatures:
        try:
            raw = b64decode(signature.sig)
        except EnvelopeError:
            continue
        accepted |= {key.key_id for key in trusted if key.verify(raw, message)}
    return frozenset(accepted)


def verify(
    envelope: Envelope, trusted: Sequence[Verifier], *, payload_types: Sequence[str], threshold: int = 1
) -> bytes:
    """The body, once at least `threshold` distinct trusted keys signed it and its type is supported;
    else an EnvelopeError saying which of the two failed (protocol.md, multi-signature verification)."""
    if threshold < 1:
        raise ValueError("a threshold below 1 would accept an unsigned envelope")
    accepted = verified_keys(envelope, trusted)
    if len(accepted) < threshold:
        hints = sorted({s.keyid for s in envelope.signatures if s.keyid}) or ["none"]
        raise EnvelopeError(
            f"{len(accepted)} of the {threshold} trusted signature(s) needed verify "
            f"({len(envelope.signatures)} signature(s), keyid hints: {', '.join(one_line(h[:16]) for h in hints)})"
        )
    if envelope.payload_type not in payload_types:
        raise EnvelopeError(f"payloadType {envelope.payload_type!r} is not {' or '.join(map(repr, payload_types))}")
    return envelope.body()


class ResourceDescriptor(BaseModel):
    """A Statement's subject: a name and a set of digests (algorithm → lowercase hex)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = ""
    digest: dict[str, str] = Field(min_length=1)


class Statement(BaseModel):
    """in-toto Statement v1: subjects, a predicate type URI and the predicate (any JSON object)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    statement_type: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: tuple[ResourceDescriptor, ...] = Field(min_length=1)
    predicate_type: str = Field(alias="predicateType", min_length=1)
    predicate: dict[str, Any] = {}

    def to_bytes(self) -> bytes:
        """Compact JSON, keys sorted, non-ASCII escaped: the same statement always gives the same body."""
        data = self.model_dump(mode="json", by_alias=True)
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")

    @classmethod
    def from_bytes(cls, body: bytes) -> Statement:
        return _parse(cls, body, "an in-toto Statement v1", "statement")

    def digest(self, name: str, algorithm: str) -> str | None:
        """The `algorithm` digest of the subject called `name` (None: no such subject or digest)."""
        found = [s.digest.get(algorithm) for s in self.subject if s.name == name]
        return found[0] if len(found) == 1 else None


_Model = TypeVar("_Model", bound=BaseModel)


def _parse(model: type[_Model], data: bytes, what: str, root: str) -> _Model:
    """`data` as `model`, or an EnvelopeError naming the first field that is wrong."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or root
        raise EnvelopeError(f"not {what}: {where}: {first['msg']}") from None
