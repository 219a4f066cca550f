"""An image's form in the blob store, without Docker: chunking, the manifest's checks, bounded
unpacking, and the refusal of a save stream that would name or retag images on load."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zlib

import pytest

from gate.core.errors import SandboxError
from worker.celery.shared.imagechunks import MAX_IMAGE_BYTES, ImageManifest, check_save_stream, pack, pieces

IMAGE = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


def manifest_for(stream: bytes, chunk_bytes: int = 4, encoding: str = "gzip") -> tuple[ImageManifest, list[bytes]]:
    blobs = [pack(piece, encoding) for piece in pieces([stream], chunk_bytes)]
    digests = tuple(hashlib.sha256(b).hexdigest() for b in blobs)
    sha = hashlib.sha256(stream).hexdigest()
    return ImageManifest(IMAGE, len(stream), sha, digests, encoding, chunk_bytes), blobs


def test_pieces_recut_any_stream_into_fixed_sizes() -> None:
    """Pieces have exactly the chunk size whatever the input's pieces were, and only the last is shorter."""
    got = list(pieces([b"ab", b"", b"cdefg", b"h", b"ijk"], 3))
    assert got == [b"abc", b"def", b"ghi", b"jk"]
    assert list(pieces([], 3)) == []


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
def test_a_manifest_round_trips_and_rebuilds_the_stream(encoding: str) -> None:
    """Encoding then decoding a manifest gives it back, and its chunks unpack to the original stream."""
    stream = b"0123456789"
    manifest, blobs = manifest_for(stream, encoding=encoding)
    again = ImageManifest.decode(manifest.encode(), IMAGE)
    assert again == manifest
    assert b"".join(again.unpack(i, blob) for i, blob in enumerate(blobs)) == stream


def test_a_manifest_for_another_image_is_refused() -> None:
    """A manifest naming another image ID than the one asked for is refused, whatever else it holds."""
    manifest, _ = manifest_for(b"0123456789")
    with pytest.raises(SandboxError, match="is for sha256:aaaaaaaaaaaa, not sha256:bbbbbbbbbbbb: refused"):
        ImageManifest.decode(manifest.encode(), OTHER)


def edited(**changes: object) -> bytes:
    manifest, _ = manifest_for(b"0123456789")
    raw = json.loads(manifest.encode())
    raw.update(changes)
    return json.dumps(raw).encode()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"not json", "malformed"),
        (b"[]", "malformed"),
        (edited(format="probegate-image/9"), "unknown format"),
        (edited(encoding="zstd"), "unknown encoding"),
        (edited(size=True), "malformed"),
        (edited(size="10"), "malformed"),
        (edited(size=MAX_IMAGE_BYTES + 1), "out of bounds"),
        (edited(chunk_bytes=0), "out of bounds"),
        (edited(size=13), "cannot hold 13 bytes"),
        (edited(chunks=["../../etc/passwd"] * 3), "chunk digest is malformed"),
        (edited(sha256="0" * 63), "malformed"),
        (edited(chunks=None), "malformed"),
    ],
)
def test_malformed_manifests_are_refused(data: bytes, why: str) -> None:
    """A manifest that is not JSON, of another format, out of bounds or inconsistent is refused."""
    with pytest.raises(SandboxError, match=why):
        ImageManifest.decode(data, IMAGE)


def test_a_gzip_bomb_chunk_stops_one_byte_past_its_piece() -> None:
    """A chunk that would unpack to far more than its piece is refused without unpacking it all."""
    manifest, _ = manifest_for(b"0123456789")
    bomb = pack(b"\0" * (64 << 20), "gzip")  # 64 MiB of zeros in ~64 KB
    with pytest.raises(SandboxError, match="does not unpack to one piece of 4 bytes"):
        manifest.unpack(0, bomb)


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (pack(b"012", "gzip"), "unpacks to 3 bytes, not 4"),
        (pack(b"0123", "gzip") + b"tail", "does not unpack to one piece"),
        (pack(b"0123", "gzip")[:-3], "does not unpack to one piece"),
        (b"\x1f\x8bnot gzip at all", "does not unpack"),
    ],
)
def test_chunks_that_unpack_wrong_are_refused(blob: bytes, why: str) -> None:
    """A chunk that unpacks short, carries trailing bytes, is truncated or is not gzip is refused."""
    manifest, _ = manifest_for(b"0123456789")
    with pytest.raises(SandboxError, match=why):
        manifest.unpack(0, blob)


def test_an_identity_chunk_of_the_wrong_length_is_refused() -> None:
    """Unpacked chunks must have exactly their piece's length (the last one its remainder)."""
    manifest, _ = manifest_for(b"0123456789", encoding="identity")
    assert manifest.unpack(2, b"89") == b"89"
    with pytest.raises(SandboxError, match="unpacks to 3 bytes, not 2"):
        manifest.unpack(2, b"89x")


def save_tar(entries: object, **files: object) -> io.BytesIO:
    """A tar shaped like `docker save` output: manifest.json plus any other JSON files given."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, value in {"manifest.json": entries, **files}.items():
            data = json.dumps(value).encode()
            info = tarfile.TarInfo(name.replace("_", "."))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


HEX = IMAGE.removeprefix("sha256:")


@pytest.mark.parametrize("config", [f"{HEX}.json", f"blobs/sha256/{HEX}"], ids=["docker-save-legacy", "oci-layout"])
def test_a_save_stream_of_the_one_untagged_image_passes(config: str) -> None:
    """One image, no tags, its config named after the ID: the shape of `docker save <id>`."""
    check_save_stream(save_tar([{"Config": config, "RepoTags": None, "Layers": []}]), IMAGE)
    check_save_stream(save_tar([{"Config": config, "Layers": []}], repositories={}), IMAGE)


@pytest.mark.parametrize(
    ("stream", "why"),
    [
        (save_tar([{"Config": f"{HEX}.json", "RepoTags": ["probegate/sandbox-python:trixie-1"]}]), "retag"),
        (save_tar([{"Config": f"{HEX}.json"}], repositories={"probegate/x": {"1": HEX}}), "retag"),
        (
            save_tar(
                [{"Config": f"blobs/sha256/{HEX}"}],
                index_json={"manifests": [{"annotations": {"io.containerd.image.name": "docker.io/library/x:1"}}]},
            ),
            "would tag it",
        ),
        (save_tar([{"Config": "b" * 64 + ".json"}]), "not sha256:aaaaaaaaaaaa: refused"),
        (save_tar([{"Config": f"{HEX}.json"}, {"Config": "b" * 64 + ".json"}]), "exactly one image"),
        (save_tar({"Config": f"{HEX}.json"}), "exactly one image"),
        (save_tar([], other={}), "exactly one image"),
        (io.BytesIO(b"plainly not a tar" * 100), "not a readable docker save tar"),
    ],
)
def test_save_streams_that_would_do_more_than_add_the_image_are_refused(stream: io.BytesIO, why: str) -> None:
    """Tags, names, another config, several images or no tar at all: refused before the engine sees it."""
    with pytest.raises(SandboxError, match=why):
        check_save_stream(stream, IMAGE)


def test_a_save_stream_without_its_manifest_is_refused() -> None:
    """A tar lacking manifest.json (what docker load would read) is refused."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("repositories")
        tar.addfile(info, io.BytesIO(b""))
    buffer.seek(0)
    with pytest.raises(SandboxError, match="no manifest\\.json"):
        check_save_stream(buffer, IMAGE)


def test_pack_uses_gzip_framing() -> None:
    """Stored chunks are plain gzip members, so `zcat` can read a chunk an operator pulls out of Redis."""
    assert zlib.decompress(pack(b"hello", "gzip"), 31) == b"hello"
