"""Content-addressed inputs over a real redis-server: workers get exactly the bytes the seal names."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery_helpers import RedisServer

from gate.core.errors import SandboxError
from gate.io.fixtures import seal_tree
from worker.celery.blobs import BlobInputs, RedisBlobStore, pack_tree, upload

pytestmark = pytest.mark.integration


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RedisBlobStore]:
    server = RedisServer(tmp_path)
    server.start()
    yield RedisBlobStore(server.url)
    server.stop()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / "probe.py").write_text("print('hi')\n")
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    return root


def test_equal_trees_pack_to_equal_bytes(tree: Path, tmp_path: Path) -> None:
    """Packing is deterministic: the same files give the same tar, whatever their mtimes."""
    first = pack_tree(tree)
    (tree / "probe.py").touch()
    assert pack_tree(tree) == first


def test_tree_round_trips_and_reseals(store: RedisBlobStore, tree: Path, tmp_path: Path) -> None:
    """A worker unpacks the uploaded tree into its cache and it re-seals to the same digest."""
    seal = seal_tree(tree).digest
    fixture = b'{"kind": "x"}'
    upload(store, tree, seal, {hashlib.sha256(fixture).hexdigest(): fixture})
    inputs = BlobInputs(store, tmp_path / "cache")
    unpacked = inputs.tree_dir(seal)
    assert seal_tree(unpacked).digest == seal
    assert inputs.fixture_bytes(hashlib.sha256(fixture).hexdigest()) == fixture
    assert inputs.tree_dir(seal) == unpacked  # second call served from the local cache


def test_a_corrupted_blob_is_refused(store: RedisBlobStore, tmp_path: Path) -> None:
    """Bytes that do not hash to their key are never handed to a trial."""
    digest = store.put(b"the real fixture")
    store.client.set(f"probegate:blob:{digest}", b"a retuned fixture")
    with pytest.raises(SandboxError, match="failed verification"):
        BlobInputs(store, tmp_path / "cache").fixture_bytes(digest)


def test_a_tree_that_does_not_reseal_is_refused(store: RedisBlobStore, tree: Path, tmp_path: Path) -> None:
    """A tree blob whose contents seal to another digest is refused (harness error, not a run)."""
    seal = seal_tree(tree).digest
    (tree / "pkg" / "mod.py").write_text("X = 2\n")  # upload different bytes under the old seal
    upload(store, tree, seal, {})
    with pytest.raises(SandboxError, match="unpacks to seal"):
        BlobInputs(store, tmp_path / "cache").tree_dir(seal)


def test_missing_tree_is_refused(store: RedisBlobStore, tmp_path: Path) -> None:
    """A seal the store has never seen is a clear SandboxError."""
    with pytest.raises(SandboxError, match="no tree blob"):
        BlobInputs(store, tmp_path / "cache").tree_dir("0" * 64)
