"""The seal of a tree: one digest over every file, plus a per-file manifest that names drift.

Digest recipe (equal to the verdict-card note's Python recipe, so its seals verify here):
sha256 over the regular files sorted component by component (as pathlib sorts paths, so `a/b`
comes before `a-b/x`), each contributing its POSIX path relative to the root in UTF-8, a NUL,
its bytes, a NUL. This module only hashes: the caller supplies the paths and a way to read them.

A patched tree (`compute_tree`) may also hold symlinks. Where the note's recipe is unambiguous
for it (no symlink, no NUL byte in any file) it is used unchanged; otherwise the tree is sealed by a
framed recipe (see `compute_tree`), so a link never seals like a file holding its target's name.

Seal file format: the hex digest on the first line, then `sha256  path` lines (as sha256sum
prints them). A file holding only the digest line still verifies; it just cannot name files.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# Opens every framed tree's stream: a note-recipe stream opens with a path, and no path starts with NUL.
FRAMED_TREE = b"\0probegate-tree-2\0"


class ManifestDiff(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        return (*self.changed, *self.added, *self.removed)

    def describe(self) -> str:
        parts = [
            f"{label} {', '.join(paths)}"
            for label, paths in (("changed", self.changed), ("added", self.added), ("removed", self.removed))
            if paths
        ]
        return "; ".join(parts) or "no file-level manifest to compare"


class Seal(BaseModel):
    """A tree digest and its manifest (relative POSIX path → sha256 of the file's bytes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    digest: str
    manifest: dict[str, str] = {}

    def diff(self, other: Seal) -> ManifestDiff:
        """Which files differ going from `self` (the recorded seal) to `other` (the tree now)."""
        old, new = self.manifest, other.manifest
        if not old:
            return ManifestDiff()
        return ManifestDiff(
            added=tuple(sorted(set(new) - set(old), key=sort_key)),
            removed=tuple(sorted(set(old) - set(new), key=sort_key)),
            changed=tuple(sorted((p for p in old.keys() & new.keys() if old[p] != new[p]), key=sort_key)),
        )

    def to_text(self) -> str:
        """The seal file text; paths holding a backslash or line break are escaped as sha256sum does."""
        ordered = sorted(self.manifest.items(), key=lambda item: sort_key(item[0]))
        lines = [self.digest] + [_line(path, digest) for path, digest in ordered]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_text(cls, text: str) -> Seal:
        """Parse a seal file; raises ValueError naming the bad line."""
        # Split on "\n" only: escaped paths hold no newline, but may hold other Unicode line breaks.
        lines = [ln.removesuffix("\r") for ln in text.split("\n") if ln.strip()]
        if not lines or not _HEX64.match(lines[0].strip()):
            raise ValueError("first line must be a 64-hex-digit sha256 digest")
        manifest: dict[str, str] = {}
        for number, line in enumerate(lines[1:], start=2):
            escaped = line.startswith("\\")
            digest, sep, path = line.removeprefix("\\").partition("  ")
            if not sep or not _HEX64.match(digest) or not path:
                raise ValueError(f"line {number} is not `sha256  path`")
            path = _unescape(path) if escaped else path
            problem = _outside(path)
            if problem:
                raise ValueError(f"line {number}: path {path!r} {problem}")
            if path in manifest:
                raise ValueError(f"line {number}: path {path!r} is listed twice")
            manifest[path] = digest
        return cls(digest=lines[0].strip(), manifest=manifest)


def _outside(path: str) -> str:
    """Why a manifest path cannot name a file inside the tree (empty when it can)."""
    if "\0" in path:
        return "holds a NUL byte"
    if path.startswith("/"):
        return "is absolute; manifest paths are relative to the tree"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "has an empty, '.' or '..' component; manifest paths stay inside the tree"
    return ""


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r"}


def _line(path: str, digest: str) -> str:
    if not any(c in path for c in _ESCAPES):
        return f"{digest}  {path}"
    return "\\" + f"{digest}  " + "".join(_ESCAPES.get(c, c) for c in path)


def _unescape(path: str) -> str:
    out: list[str] = []
    chars = iter(path)
    for c in chars:
        if c == "\\":
            nxt = next(chars, "")
            out.append(_UNESCAPES.get(nxt, "\\" + nxt))
        else:
            out.append(c)
    return "".join(out)


def sort_key(path: str) -> tuple[str, ...]:
    """Component-wise order, as `sorted(Path.rglob(...))` yields it."""
    return PurePosixPath(path).parts


def compute(paths: Iterable[str], read: Callable[[str], Iterable[bytes]]) -> Seal:
    """Seal the files at `paths` (relative POSIX), reading each through `read` in chunks."""
    tree = hashlib.sha256()
    manifest: dict[str, str] = {}
    for path in sorted(paths, key=sort_key):
        single = hashlib.sha256()
        tree.update(path.encode("utf-8"))
        tree.update(b"\0")
        for chunk in read(path):
            tree.update(chunk)
            single.update(chunk)
        tree.update(b"\0")
        manifest[path] = single.hexdigest()
    return Seal(digest=tree.hexdigest(), manifest=manifest)


def compute_tree(
    paths: Iterable[str], read: Callable[[str], Iterable[bytes]], links: Mapping[str, str] | None = None
) -> Seal:
    """Seal a patched tree: regular files at `paths` (read through `read`) and symlinks (`links`, path →
    target). A tree of files holding no NUL byte gets `compute`'s digest, byte for byte; any other tree
    the framed one: FRAMED_TREE, then per entry (in `sort_key` order) a type byte (b"f" file, b"l"
    link), the path's UTF-8 length as 8 bytes big-endian, the path, and the 32-byte sha256 of the
    file's bytes or of the link's target. The note's stream cannot tell a file holding
    `x\0b.py\0y` from the two files `x` and `b.py` (or a link from a file naming its target); the
    framed stream can, and the two never meet, since only the framed one starts with a NUL."""
    links = dict(links or {})
    note = hashlib.sha256()
    framed = hashlib.sha256(FRAMED_TREE)
    manifest: dict[str, str] = {}
    plain = not links  # the note's recipe stays unambiguous while no link and no NUL byte is seen
    for path in sorted(set(paths) | links.keys(), key=sort_key):
        name = path.encode("utf-8")
        single = hashlib.sha256()
        if path in links:
            kind = b"l"
            single.update(links[path].encode("utf-8"))
        else:
            kind = b"f"
            note.update(name + b"\0")
            for chunk in read(path):
                plain = plain and b"\0" not in chunk
                note.update(chunk)
                single.update(chunk)
            note.update(b"\0")
        framed.update(kind + len(name).to_bytes(8, "big") + name + single.digest())
        if kind == b"l":  # behind a marker, so a diff names a file turned into a link to its own bytes
            single = hashlib.sha256(b"symlink\0" + single.digest())
        manifest[path] = single.hexdigest()
    return Seal(digest=(note if plain else framed).hexdigest(), manifest=manifest)


def describe_change(old: Seal | None, new: Seal, *, written: bool) -> dict[str, Any]:
    """The JSON report for going from the recorded seal `old` (None: no seal file) to the tree's `new`."""
    if old is not None and old.digest == new.digest:
        return {"changed": False, "seal": new.digest}
    if old is None:
        diff = ManifestDiff(added=tuple(sorted(new.manifest, key=sort_key)))
        detail = "no seal file: every file is new"
    else:
        diff = old.diff(new)
        detail = diff.describe()
    return {
        "changed": True,
        "seal": new.digest,
        "previous": old.digest if old is not None else None,
        "files": {"changed": list(diff.changed), "added": list(diff.added), "removed": list(diff.removed)},
        "detail": detail,
        "written": written,
    }
