"""Ed25519 keys on disk: the coordinator's card-signing key and each worker's result-signing key.

A private key is a PKCS#8 PEM file written with mode 0600 and never read by anything that runs in a
sandbox; its public half is a SubjectPublicKeyInfo PEM file (`<name>.pub`), the form openssl,
cosign and in-toto verifiers read. A key is named by its key id: the sha256 of its 32 raw public
bytes, in hex. Signing and verifying go through `cryptography` (a kept library, constant-time);
nothing here hand-rolls a primitive.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gate.core.errors import ConfigError, UsageError
from gate.io.inputs import read_input, reason

_RAW = serialization.Encoding.Raw, serialization.PublicFormat.Raw
# What cryptography raises on a key file it cannot load: garbled PEM/DER (ValueError, TypeError) or a
# well-formed key of an algorithm it does not know (an unknown OID: UnsupportedAlgorithm).
_UNLOADABLE = (ValueError, TypeError, UnsupportedAlgorithm)
_PUBLIC_PEM = b"-----BEGIN PUBLIC KEY-----"


class KeyFileError(ConfigError):
    """A key file that is not an Ed25519 key of the kind expected (private where public was named, or
    garbled); `file` names it."""


@dataclass(frozen=True)
class VerifyKey:
    """An Ed25519 public key; `key_id` is the sha256 of its raw bytes."""

    key: Ed25519PublicKey

    @property
    def raw(self) -> bytes:
        return self.key.public_bytes(*_RAW)

    @property
    def key_id(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()

    def verify(self, signature: bytes, message: bytes) -> bool:
        """True when `signature` is this key's signature over exactly `message`."""
        try:
            self.key.verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True

    def pem(self) -> bytes:
        return self.key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    @classmethod
    def from_raw(cls, raw: bytes) -> VerifyKey:
        """A key from its 32 raw bytes (ValueError when they are not 32)."""
        return cls(Ed25519PublicKey.from_public_bytes(raw))

    @classmethod
    def from_pem(cls, data: bytes, *, file: str = "<key>") -> VerifyKey:
        """A public key from PEM text; anything else (a private key included) is a KeyFileError."""
        try:
            key = serialization.load_pem_public_key(data)
        except _UNLOADABLE as exc:
            raise KeyFileError(f"not a PEM public key ({type(exc).__name__})", file=file) from exc
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFileError(f"not an Ed25519 key ({type(key).__name__})", file=file)
        return cls(key)


@dataclass(frozen=True)
class SigningKey:
    """An Ed25519 private key; sign with it, publish `public()`."""

    key: Ed25519PrivateKey

    def sign(self, message: bytes) -> bytes:
        return self.key.sign(message)

    def public(self) -> VerifyKey:
        return VerifyKey(self.key.public_key())

    @property
    def key_id(self) -> str:
        return self.public().key_id

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(Ed25519PrivateKey.generate())


def public_path(private: Path) -> Path:
    """Where a private key's public half is written: beside it, `.pub` appended."""
    return private.with_name(private.name + ".pub")


def write_new_key(path: Path) -> SigningKey:
    """Create a key at `path` (0600, refusing to overwrite) and its public half at `path.pub`."""
    key = SigningKey.generate()
    pem = key.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:  # a regular file on the way, /proc, a name too long
        raise UsageError(f"cannot create the key's folder: {reason(exc)}", file=str(path.parent)) from None
    try:
        # O_EXCL: two workers starting at once on one home must not each write half a key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise KeyFileError("a key already exists here; refusing to overwrite it", file=str(path)) from exc
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write the key: {reason(exc)}", file=str(path)) from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        _write_public(public_path(path), key.public().pem())
    except BaseException:
        path.unlink(missing_ok=True)  # never half a pair: a private key without its public half
        raise
    return key


def _write_public(path: Path, pem: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except (OSError, ValueError) as exc:  # e.g. PATH.pub one character too long for the file system
        raise UsageError(f"cannot write the public key: {reason(exc)}", file=str(path)) from None
    with os.fdopen(fd, "wb") as out:
        out.write(pem)


def load_or_create(path: Path) -> SigningKey:
    """The key at `path`, created on first use (a worker's first start)."""
    if not path.exists():
        try:
            return write_new_key(path)
        except KeyFileError:
            pass  # another process created it first: read theirs
    return load_signing_key(path)


def load_signing_key(path: Path) -> SigningKey:
    """A private key file; a missing one is InputMissingError, a readable-by-others or wrong one KeyFileError."""
    data, mode = _read(path)
    if _PUBLIC_PEM in data:  # its kind first: a public key's mode says nothing about it
        raise KeyFileError("a public key; name the private key (the file without .pub)", file=str(path))
    if mode & 0o077:
        raise KeyFileError("private key is readable by group or others (chmod 600 it)", file=str(path))
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except _UNLOADABLE as exc:
        raise KeyFileError(f"not an unencrypted PEM private key ({type(exc).__name__})", file=str(path)) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"not an Ed25519 key ({type(key).__name__})", file=str(path))
    return SigningKey(key)


def load_verify_key(path: Path) -> VerifyKey:
    """A public key file (PEM); a private key named here is refused rather than silently used."""
    return VerifyKey.from_pem(_read(path)[0], file=str(path))


def _read(path: Path) -> tuple[bytes, int]:
    """A key file's bytes and mode, through the one reader that never blocks (a FIFO is refused)."""
    data = read_input(path, "key file", missing="key file not found")
    try:
        return data, os.stat(path).st_mode
    except (OSError, ValueError) as exc:  # replaced or removed since the read
        raise KeyFileError(f"cannot read key file ({reason(exc)})", file=str(path)) from None
