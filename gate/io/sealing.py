"""Sealing a secret to one recipient: HPKE (RFC 9180, X25519 + HKDF-SHA256 + ChaCha20-Poly1305) through
`cryptography`, single-shot, with `info` binding the sealed bytes to what they answer. The join reply that carries
a new worker's broker password is sealed to the X25519 key named in its signed join request
(gate.core.trust.invites), so the broker, and everyone who can read the reply, sees only ciphertext.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.hpke import AEAD, KDF, KEM, Suite

from gate.core.errors import ConfigError

_SUITE = Suite(KEM.X25519, KDF.HKDF_SHA256, AEAD.CHACHA20_POLY1305)
_RAW = serialization.Encoding.Raw, serialization.PublicFormat.Raw


class SealError(ConfigError):
    """Sealed bytes that do not open under this key and context (tampered, or meant for another)."""


@dataclass(frozen=True)
class OpeningKey:
    """A one-use X25519 key pair: its public half (hex) goes out, sealed replies come back to it."""

    key: X25519PrivateKey

    @classmethod
    def generate(cls) -> OpeningKey:
        return cls(X25519PrivateKey.generate())

    @property
    def public_hex(self) -> str:
        return self.key.public_key().public_bytes(*_RAW).hex()

    def open(self, sealed: bytes, info: bytes) -> bytes:
        """The plaintext sealed to this key under `info`; SealError when it does not open."""
        try:
            return _SUITE.decrypt(sealed, self.key, info=info)
        except (InvalidTag, ValueError) as exc:
            raise SealError(f"a sealed reply that does not open under this key ({type(exc).__name__})") from None


def seal(plaintext: bytes, public_hex: str, info: bytes) -> bytes:
    """`plaintext` sealed to the X25519 public key `public_hex` (32 raw bytes, hex) under `info`."""
    return _SUITE.encrypt(plaintext, X25519PublicKey.from_public_bytes(bytes.fromhex(public_hex)), info=info)
