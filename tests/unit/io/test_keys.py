"""Ed25519 key files: created once with private mode, read back, and refused when wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gate.core.errors import InputMissingError
from gate.io.keys import KeyFileError, load_or_create, load_signing_key, load_verify_key, public_path, write_new_key


def test_new_key_round_trips_and_signs(tmp_path: Path) -> None:
    """A written key reads back with the same key id, and its public half verifies only its own message."""
    key = write_new_key(tmp_path / "k")
    public = load_verify_key(public_path(tmp_path / "k"))
    assert load_signing_key(tmp_path / "k").key_id == key.key_id == public.key_id
    assert os.stat(tmp_path / "k").st_mode & 0o777 == 0o600
    signature = key.sign(b"batch 1")
    assert public.verify(signature, b"batch 1")
    assert not public.verify(signature, b"batch 2")
    assert not public.verify(signature[:-1] + bytes([signature[-1] ^ 1]), b"batch 1")


def test_existing_key_is_never_overwritten(tmp_path: Path) -> None:
    """Creating a key where one exists is refused; load_or_create returns the existing one."""
    key = write_new_key(tmp_path / "k")
    with pytest.raises(KeyFileError, match="refusing to overwrite"):
        write_new_key(tmp_path / "k")
    assert load_or_create(tmp_path / "k").key_id == key.key_id


def test_wrong_key_files_are_refused_with_their_name(tmp_path: Path) -> None:
    """A private key named as public, a group-readable private key, garbage and a missing file each fail in one line."""
    write_new_key(tmp_path / "k")
    with pytest.raises(KeyFileError, match="not a PEM public key"):
        load_verify_key(tmp_path / "k")
    os.chmod(tmp_path / "k", 0o640)
    with pytest.raises(KeyFileError, match="chmod 600"):
        load_signing_key(tmp_path / "k")
    (tmp_path / "junk.pub").write_bytes(b"hello")
    with pytest.raises(KeyFileError) as caught:
        load_verify_key(tmp_path / "junk.pub")
    assert str(caught.value).startswith(str(tmp_path / "junk.pub"))
    with pytest.raises(InputMissingError):
        load_verify_key(tmp_path / "absent.pub")
