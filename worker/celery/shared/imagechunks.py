"""An image's form in the blob store: its `docker save` stream cut into fixed-size pieces, each
stored gzip'd as a blob by digest, and a manifest blob binding the image ID, the whole stream's
size and sha256, and the chunk digests in order. Plus the check a stream must pass before the
engine loads it: it adds the one image it claims to be, and names or retags nothing.

Everything here is parsing and checking of bytes that came through the broker's Redis, whose
other writers are not trusted: any doubt is a SandboxError, never a guess.
"""

from __future__ import annotations

import json
import math
import re
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from gate.core.errors import SandboxError
from worker.host.engine import IMAGE_ID

FORMAT = "probegate-image/1"
# About 8 MiB: a Redis value this size moves in milliseconds, one of 150 MB blocks Redis for a while.
# Just under 8 MiB, as Redis's allocator rounds a value of 8 MiB plus its header up to 10 MiB.
CHUNK_BYTES = (8 << 20) - (64 << 10)
MAX_CHUNK_BYTES = 64 << 20
# A manifest claiming more is refused: the bound on what one fetch writes to the worker's disk.
MAX_IMAGE_BYTES = 32 << 30
GZIP_LEVEL = 1  # level 1 already halves a Python image (149 MB → 59 MB); higher levels cost far more CPU
_HEX64 = re.compile(r"[0-9a-f]{64}")
_MAX_TAR_JSON = 1 << 20  # manifest.json and friends are a few hundred bytes
# Annotations by which an OCI layout (docker 25+) names the image it holds; a load would tag it.
_NAME_ANNOTATIONS = ("io.containerd.image.name", "org.opencontainers.image.ref.name")


def pieces(stream: Iterable[bytes], size: int) -> Iterator[bytes]:
    """Re-cut a byte stream into pieces of exactly `size` bytes (the last may be shorter)."""
    pending = bytearray()
    for data in stream:
        pending += data
        while len(pending) >= size:
            yield bytes(pending[:size])
            del pending[:size]
    if pending:
        yield bytes(pending)


def pack(piece: bytes, encoding: str) -> bytes:
    """A piece as it is stored: gzip'd, or as is ("identity")."""
    if encoding == "identity":
        return piece
    packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # wbits 31: gzip framing
    return packer.compress(piece) + packer.flush()


@dataclass(frozen=True)
class ImageManifest:
    """What the blob store's `image:<image id>` names: enough to fetch, verify and rebuild the stream."""

    image_id: str
    size: int
    sha256: str
    chunks: tuple[str, ...]
    encoding: str = "gzip"
    chunk_bytes: int = CHUNK_BYTES

    def encode(self) -> bytes:
        fields = {
            "format": FORMAT,
            "image_id": self.image_id,
            "size": self.size,
            "sha256": self.sha256,
            "encoding": self.encoding,
            "chunk_bytes": self.chunk_bytes,
            "chunks": list(self.chunks),
        }
        return json.dumps(fields, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, image_id: str) -> ImageManifest:
        """The manifest in `data`, refused unless well-formed and made for `image_id`."""
        try:
            raw = json.loads(data)
            manifest = cls(
                image_id=str(raw["image_id"]),
                size=_int(raw["size"]),
                sha256=str(raw["sha256"]),
                chunks=tuple(str(c) for c in raw["chunks"]),
                encoding=str(raw["encoding"]),
                chunk_bytes=_int(raw["chunk_bytes"]),
            )
            form = raw["format"]
        except (ValueError, KeyError, TypeError) as exc:
            raise SandboxError(f"image manifest is malformed: {exc}") from None
        if manifest.image_id != image_id:
            raise SandboxError(f"image manifest is for {manifest.image_id[:19]}, not {image_id[:19]}: refused")
        problem = manifest._problem(form)
        if problem:
            raise SandboxError(f"image manifest refused: {problem}")
        return manifest

    def _problem(self, form: object) -> str:
        if form != FORMAT:
            return f"unknown format {str(form)[:40]!r}"
        if not IMAGE_ID.fullmatch(self.image_id) or not _HEX64.fullmatch(self.sha256):
            return "image ID or sha256 malformed"
        if self.encoding not in ("gzip", "identity"):
            return f"unknown encoding {self.encoding[:20]!r}"
        if not (0 < self.chunk_bytes <= MAX_CHUNK_BYTES and 0 < self.size <= MAX_IMAGE_BYTES):
            return f"size {self.size} or chunk size {self.chunk_bytes} out of bounds"
        if len(self.chunks) != math.ceil(self.size / self.chunk_bytes):
            return f"{len(self.chunks)} chunks cannot hold {self.size} bytes in pieces of {self.chunk_bytes}"
        if not all(_HEX64.fullmatch(c) for c in self.chunks):
            return "a chunk digest is malformed"
        return ""

    def unpack(self, index: int, blob: bytes) -> bytes:
        """Piece `index` of the stream from its stored (already digest-verified) blob; SandboxError
        unless it unpacks to exactly the piece's length (a gzip bomb stops one byte past it)."""
        expected = min(self.chunk_bytes, self.size - index * self.chunk_bytes)
        piece = blob
        if self.encoding == "gzip":
            unpacker = zlib.decompressobj(31)
            try:
                piece = unpacker.decompress(blob, expected + 1)
            except zlib.error as exc:
                raise SandboxError(f"image chunk {index} does not unpack: {exc}") from None
            if not unpacker.eof or unpacker.unconsumed_tail or unpacker.unused_data:
                raise SandboxError(f"image chunk {index} does not unpack to one piece of {expected} bytes")
        if len(piece) != expected:
            raise SandboxError(f"image chunk {index} unpacks to {len(piece)} bytes, not {expected}")
        return piece


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"not an integer: {str(value)[:20]!r}")
    return value


def check_save_stream(fileobj: IO[bytes], image_id: str) -> None:
    """Refuse a `docker save` tar that would do more on load than add `image_id` untagged: more
    than one image, any repository tag or name (a load would move that tag onto it), or a config
    named after another image. The engine then checks the config and layers against the ID."""
    hex_id = image_id.removeprefix("sha256:")
    try:
        with tarfile.open(fileobj=fileobj, mode="r:") as tar:
            entries = _json_member(tar, "manifest.json")
            repositories = _json_member(tar, "repositories", missing={})
            index = _json_member(tar, "index.json", missing={})
    except (tarfile.TarError, OSError, ValueError) as exc:
        raise SandboxError(f"image stream is not a readable docker save tar: {exc}") from None
    if not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], dict):
        raise SandboxError("image stream must hold exactly one image: refused")
    [entry] = entries
    if entry.get("Config") not in (f"{hex_id}.json", f"blobs/sha256/{hex_id}"):
        raise SandboxError(f"image stream holds config {str(entry.get('Config'))[:60]!r}, not {image_id[:19]}: refused")
    if entry.get("RepoTags") or repositories:
        raise SandboxError("image stream names repository tags (a load would retag images): refused")
    described = index.get("manifests", []) if isinstance(index, dict) else []
    if any(
        name in (m.get("annotations") or {}) for m in described if isinstance(m, dict) for name in _NAME_ANNOTATIONS
    ):
        raise SandboxError("image stream names an image reference (a load would tag it): refused")


def _json_member(tar: tarfile.TarFile, name: str, missing: Any = None) -> Any:
    try:
        member = tar.getmember(name)
    except KeyError:
        if missing is None:
            raise ValueError(f"no {name} in it") from None
        return missing
    handle = tar.extractfile(member) if member.isfile() and member.size <= _MAX_TAR_JSON else None
    if handle is None:
        raise ValueError(f"{name} is not a small regular file")
    return json.loads(handle.read())
