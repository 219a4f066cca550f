"""Content-addressed inputs over a real redis-server: workers get exactly the bytes the seal names."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.servers import RedisServer

from gate.core.errors import SandboxError
from gate.io.fixtures import seal_tree
from gate.io.patchedtree import laid_out, seal_patched
from worker.celery.shared.blobs import BlobInputs, RedisBlobStore, pack_tree, upload

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


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A snapshot holding a link to a file and a link to a folder, both inside it."""
    root = tmp_path / "linked"
    (root / "docs" / "v2").mkdir(parents=True)
    (root / "docs" / "v2" / "index.md").write_text("# v2\n")
    (root / "real.py").write_text("X = 1\n")
    (root / "probe.py").write_text("import link\n")
    os.symlink("real.py", root / "link.py")
    os.symlink("v2", root / "docs" / "latest")
    return root


def test_a_tree_with_symlinks_round_trips_as_links(store: RedisBlobStore, linked: Path, tmp_path: Path) -> None:
    """Links travel in the tar as links (deterministically), unpack as links and re-seal to the same digest."""
    seal = seal_patched(laid_out(linked)).digest
    packed = pack_tree(linked)
    assert pack_tree(linked) == packed
    with tarfile.open(fileobj=io.BytesIO(packed)) as tar:
        kinds = {member.name: (member.issym(), member.linkname) for member in tar.getmembers()}
    assert kinds["link.py"] == (True, "real.py") and kinds["docs/latest"] == (True, "v2")
    assert "docs/latest/index.md" not in kinds  # the linked folder's files travel once
    upload(store, linked, seal, {})
    unpacked = BlobInputs(store, tmp_path / "cache").tree_dir(seal)
    assert os.readlink(unpacked / "link.py") == "real.py" and os.readlink(unpacked / "docs" / "latest") == "v2"
    assert seal_patched(laid_out(unpacked)).digest == seal


def evil_tar(links: dict[str, str]) -> bytes:
    """A tar (as a broker's other writer could store one) holding a file and the given symlinks."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("probe.py")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"x=1"))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "links",
    [{"passwd": "/etc/passwd"}, {"up": "../../secret"}, {"a/up": "..", "z": "a/up/.."}],
    ids=["absolute", "climbing", "through-a-link"],
)
def test_an_unpacked_tar_with_an_escaping_symlink_is_refused(
    store: RedisBlobStore, tmp_path: Path, links: dict[str, str]
) -> None:
    """A tree blob whose symlink leads out of the tree (absolute, `..`, or `..` through another link) is
    refused by the tar filter or the re-check, as a SandboxError; nothing is left in the cache."""
    store.name("tree:" + "e" * 64, store.put(evil_tar(links)))
    cache = tmp_path / "cache"
    with pytest.raises(SandboxError, match="refused"):
        BlobInputs(store, cache).tree_dir("e" * 64)
    assert list((cache / "trees").iterdir()) == []
