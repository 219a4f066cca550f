"""Inputs travel by content: blobs keyed by sha256, in Redis by default, behind a small protocol
so an object store can take its place. Workers fetch by digest, verify, and cache by digest on
local disk; nothing is read from a shared filesystem.

A patched tree travels as one deterministic tar blob, found through the tree's seal:
`tree:<seal>` names the tar's digest, and the unpacked tree must re-seal to `<seal>`. Its symlinks
travel as symlinks; workers unpack with tarfile's "data" filter (no absolute or escaping link, no
device, nothing outside the folder) and check the links again as the coordinator did.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Protocol

import redis

from gate.core.errors import GateError, SandboxError
from gate.io.artifacts import write_atomic
from gate.io.patchedtree import Beneath, laid_out, seal_patched
from gate.io.snapshot import world_readable
from gate.io.untar import extract_data
from worker.celery.shared.broker import broker_call

BLOB_TTL_S = 24 * 3600


class BlobStore(Protocol):
    def put(self, data: bytes) -> str:
        """Store `data`; returns its sha256 hex digest."""
        ...

    def get(self, digest: str) -> bytes | None:
        """The bytes stored under `digest`, or None when absent (never unverified bytes)."""
        ...

    def name(self, name: str, digest: str) -> None:
        """Let `name` point at the blob `digest` (e.g. tree:<seal> → tar digest)."""
        ...

    def lookup(self, name: str) -> str | None: ...


class RedisBlobStore:
    """Blobs as Redis strings under `probegate:blob:<sha256>`, expiring after a day unused."""

    def __init__(self, url: str, *, ttl_s: int = BLOB_TTL_S) -> None:
        self.client = redis.Redis.from_url(url)
        self.ttl_s = ttl_s

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        key = f"probegate:blob:{digest}"
        with broker_call("storing a blob"):
            # SET NX keeps one copy however many coordinators upload the same tree.
            if not self.client.set(key, data, ex=self.ttl_s, nx=True):
                self.client.expire(key, self.ttl_s)
        return digest

    def get(self, digest: str) -> bytes | None:
        with broker_call("fetching a blob"):
            data = self.client.get(f"probegate:blob:{digest}")
        if data is None or hashlib.sha256(data).hexdigest() != digest:
            return None
        return data

    def name(self, name: str, digest: str) -> None:
        with broker_call("naming a blob"):
            self.client.set(f"probegate:name:{name}", digest, ex=self.ttl_s)

    def lookup(self, name: str) -> str | None:
        with broker_call("looking up a blob name"):
            value = self.client.get(f"probegate:name:{name}")
        return value.decode() if value else None


def pack_tree(root: Path) -> bytes:
    """A tar of the tree's files and symlinks with fixed metadata, so equal trees pack to equal bytes."""
    tree = laid_out(root)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar, Beneath(root) as beneath:
        for rel in sorted([*tree.files, *tree.links]):
            info = tarfile.TarInfo(rel)
            info.mtime = 0
            if rel in tree.links:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, tree.links[rel], 0o777
                tar.addfile(info)
                continue
            with open(beneath.open(rel), "rb") as handle:
                found = os.fstat(handle.fileno())
                info.size = found.st_size
                info.mode = 0o755 if found.st_mode & 0o111 else 0o644
                tar.addfile(info, handle)
    return buffer.getvalue()


def upload(store: BlobStore, tree: Path, tree_seal: str, fixtures: dict[str, bytes]) -> None:
    """Put a patched tree and its fixture blobs where workers can fetch them by digest."""
    store.name(f"tree:{tree_seal}", store.put(pack_tree(tree)))
    for digest, data in fixtures.items():
        if store.put(data) != digest:
            raise SandboxError(f"fixture blob {digest[:16]} does not hash to its own digest")


class BlobInputs:
    """Worker-side Inputs: fetch by digest, verify, cache on local disk by digest."""

    def __init__(self, store: BlobStore, cache_dir: Path) -> None:
        self.store = store
        self.cache = cache_dir
        (cache_dir / "trees").mkdir(parents=True, exist_ok=True)
        (cache_dir / "blobs").mkdir(parents=True, exist_ok=True)
        os.chmod(cache_dir / "trees", 0o700)  # trees are given to the sandbox uid: no host process of it may reach them

    def fixture_bytes(self, digest: str) -> bytes:
        cached = self.cache / "blobs" / digest
        if cached.is_file():
            data = cached.read_bytes()
            if hashlib.sha256(data).hexdigest() == digest:
                return data
        data = self._fetch(digest)
        write_atomic(cached, data)
        return data

    def tree_dir(self, digest: str) -> Path:
        final = self.cache / "trees" / digest
        if final.is_dir():
            return final
        tar_digest = self.store.lookup(f"tree:{digest}")
        if tar_digest is None:
            raise SandboxError(f"no tree blob for seal {digest[:16]} in the blob store")
        blob = self._fetch(tar_digest)
        staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=self.cache / "trees"))
        try:
            try:
                with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                    extract_data(tar, staging)
                got = seal_patched(laid_out(staging)).digest
            except (tarfile.TarError, GateError) as exc:
                # The coordinator checked this tree before upload: a tar that escapes is not the patch's.
                raise SandboxError(f"tree blob for seal {digest[:16]} refused: {exc}") from exc
            if got != digest:
                raise SandboxError(f"tree blob unpacks to seal {got[:16]}, expected {digest[:16]}")
            world_readable(staging)  # the sandbox user must be able to read the tree
            try:
                staging.rename(final)
            except OSError:  # another process unpacked the same tree first
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return final

    def _fetch(self, digest: str) -> bytes:
        data = self.store.get(digest)
        if data is None:
            raise SandboxError(f"blob {digest[:16]} missing from the blob store or failed verification")
        return data
