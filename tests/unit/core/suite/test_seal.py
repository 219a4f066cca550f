"""gate.seal: the tree digest recipe, the seal file format and the manifest diff."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.scratch import memory_scratch

from gate.core.suite.seal import ManifestDiff, Seal, compute, sort_key

H = hashlib.sha256


def note_recipe(root: Path) -> str:
    """The verdict-card note's Python recipe, verbatim in substance."""
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for path in files:
        rel = path.relative_to(root).as_posix().encode()
        digest.update(rel)
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def seal_dir(root: Path, chunk: int | None = None) -> Seal:
    paths = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]

    def read(rel: str):
        data = (root / rel).read_bytes()
        if chunk is None:
            return [data]
        return [data[i : i + chunk] for i in range(0, len(data), chunk)]

    return compute(paths, read)


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


TRICKY = {
    "a/b": b"slash",
    "a-b/x": b"dash",
    "a.b": b"dot",
    "a/c/d.json": b'{"x": 1}',
    "ab": b"",
    "Z": b"upper",
    "\u00e9t\u00e9.txt": "caf\u00e9".encode(),
    "bin/blob": bytes(range(256)) * 3 + b"\0\0",
}


def test_string_sort_and_path_sort_differ_on_the_tricky_names():
    """The fixture names really do sort differently as strings and as paths (so the test below bites)."""
    assert sorted(["a/b", "a-b/x"]) == ["a-b/x", "a/b"]
    assert sorted(["a/b", "a-b/x"], key=sort_key) == ["a/b", "a-b/x"]


def test_compute_equals_the_note_recipe(tmp_path):
    """compute over a tree with a/b and a-b/x gives exactly the note's Python recipe digest."""
    write_tree(tmp_path, TRICKY)
    seal = seal_dir(tmp_path)
    assert seal.digest == note_recipe(tmp_path)


def test_compute_differs_from_string_sorted_recipe(tmp_path):
    """Hashing in plain string order would give another digest: the order is part of the recipe."""
    write_tree(tmp_path, TRICKY)
    wrong = hashlib.sha256()
    for rel in sorted(TRICKY):
        wrong.update(rel.encode() + b"\0" + TRICKY[rel] + b"\0")
    assert seal_dir(tmp_path).digest != wrong.hexdigest()


def test_manifest_holds_each_files_own_sha256(tmp_path):
    """The manifest maps each relative POSIX path to the sha256 of that file's bytes."""
    write_tree(tmp_path, TRICKY)
    assert seal_dir(tmp_path).manifest == {rel: H(data).hexdigest() for rel, data in TRICKY.items()}


def test_compute_ignores_input_order():
    """compute sorts the paths itself: the order they are given in does not matter."""
    files = {"b": b"2", "a/z": b"1", "a-b": b"3"}
    read = lambda p: [files[p]]  # noqa: E731
    assert compute(["b", "a/z", "a-b"], read) == compute(["a-b", "b", "a/z"], read)


def test_empty_tree_digest_is_sha256_of_nothing():
    """A tree with no files seals to the sha256 of the empty string, with an empty manifest."""
    seal = compute([], lambda p: [b""])
    assert seal == Seal(digest=H(b"").hexdigest(), manifest={})


def test_compute_digest_is_sensitive_to_path_and_content():
    """Renaming a file or changing one byte changes the digest."""
    base = compute(["a"], lambda p: [b"x"]).digest
    assert compute(["b"], lambda p: [b"x"]).digest != base
    assert compute(["a"], lambda p: [b"y"]).digest != base


def test_compute_separates_path_from_content():
    """Moving bytes between the path and the content changes the digest (the NUL separators work)."""
    assert compute(["ab"], lambda p: [b"c"]).digest != compute(["a"], lambda p: [b"bc"]).digest


@given(st.dictionaries(st.text("ab-./_", min_size=1, max_size=6), st.binary(max_size=200), max_size=6), st.data())
def test_chunking_does_not_change_the_seal(files, data):
    """However each file's bytes are split into chunks, the seal is the same."""
    files = {k: v for k, v in files.items() if "" not in k.split("/")}

    def chunked(p):
        content = files[p]
        cuts = sorted(data.draw(st.lists(st.integers(0, len(content)), max_size=5), label=f"cuts {p}"))
        bounds = [0, *cuts, len(content)]
        return [content[a:b] for a, b in itertools.pairwise(bounds)]

    whole = compute(files, lambda p: [files[p]])
    assert compute(files, chunked) == whole


def _paths_strategy():
    segment = st.text("ab-._", min_size=1, max_size=3).filter(lambda s: s not in (".", ".."))
    paths = st.lists(st.lists(segment, min_size=1, max_size=3).map("/".join), min_size=1, max_size=8, unique=True)

    def no_file_is_a_directory(ps):
        return not any(q.startswith(p + "/") for p in ps for q in ps)

    return paths.filter(no_file_is_a_directory)


@given(_paths_strategy(), st.binary(max_size=16))
def test_compute_equals_the_note_recipe_on_generated_trees(paths, content):
    """On generated trees of dashed, dotted and nested names, compute equals the note's recipe."""
    with memory_scratch() as root:
        write_tree(root, {p: content + p.encode() for p in paths})
        assert seal_dir(root, chunk=3).digest == note_recipe(root)


_segment = st.text("ab-._\u00e9 ", min_size=1, max_size=3).filter(lambda s: s not in (".", ".."))
_rel_paths = st.lists(_segment, min_size=1, max_size=3).map("/".join)


@given(st.lists(_rel_paths, max_size=10))
def test_sort_key_orders_like_pathlib(paths):
    """sort_key orders normalised relative paths exactly as sorting pathlib paths does."""
    assert sorted(paths, key=sort_key) == [p.as_posix() for p in sorted(PurePosixPath(x) for x in paths)]


# --- seal file format -------------------------------------------------------------------------------


SAMPLE = Seal(digest="a" * 64, manifest={"a-b/x": "1" * 64, "a/b": "2" * 64, "z y.json": "3" * 64})


def test_to_text_writes_digest_then_sha256sum_lines_in_path_order():
    """to_text puts the digest first, then `sha256  path` lines in pathlib order, ending in a newline."""
    assert SAMPLE.to_text() == (
        "a" * 64 + "\n" + "2" * 64 + "  a/b\n" + "1" * 64 + "  a-b/x\n" + "3" * 64 + "  z y.json\n"
    )


def test_from_text_round_trips_to_text():
    """from_text(to_text(seal)) gives the same seal back."""
    assert Seal.from_text(SAMPLE.to_text()) == SAMPLE


hexes = st.text("0123456789abcdef", min_size=64, max_size=64)
safe_paths = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=20).filter(
    lambda path: all(part not in ("", ".", "..") for part in path.split("/"))  # inside the tree, as from_text requires
)


@given(hexes, st.dictionaries(safe_paths, hexes, max_size=6))
def test_from_text_round_trips_any_printable_paths(digest, manifest):
    """Seals whose paths hold no line-breaking characters survive to_text/from_text unchanged."""
    seal = Seal(digest=digest, manifest=manifest)
    assert Seal.from_text(seal.to_text()) == seal


def test_from_text_round_trips_a_path_with_a_newline():
    """A seal whose manifest names a file with a newline in it reads back unchanged."""
    seal = Seal(digest="a" * 64, manifest={"odd\nname.json": "b" * 64})
    assert Seal.from_text(seal.to_text()) == seal


def test_from_text_accepts_a_digest_only_file():
    """A seal file holding only the digest line parses, with an empty manifest."""
    assert Seal.from_text("a" * 64 + "\n") == Seal(digest="a" * 64)


def test_from_text_tolerates_blank_lines_crlf_and_padding():
    """Blank lines, CRLF line ends and spaces around the digest line are ignored."""
    text = "\r\n  " + "a" * 64 + "  \r\n\r\n" + "b" * 64 + "  x/y\r\n"
    assert Seal.from_text(text) == Seal(digest="a" * 64, manifest={"x/y": "b" * 64})


def test_from_text_keeps_spaces_inside_paths():
    """A path containing spaces (even double spaces) is split only at the first double space."""
    assert Seal.from_text("a" * 64 + "\n" + "b" * 64 + "  my  file.txt\n").manifest == {"my  file.txt": "b" * 64}


@pytest.mark.parametrize("text", ["", "\n\n", "not a digest\n", "A" * 64 + "\n", "a" * 63 + "\n", "a" * 65 + "\n"])
def test_from_text_refuses_a_bad_first_line(text):
    """An empty file or a first line that is not 64 lowercase hex digits is refused."""
    with pytest.raises(ValueError, match="first line must be a 64-hex-digit sha256 digest"):
        Seal.from_text(text)


@pytest.mark.parametrize(
    "line",
    [
        "b" * 64 + " x",  # one space
        "b" * 64 + "  ",  # no path
        "B" * 64 + "  x",  # upper-case hex
        "b" * 63 + "  x",  # short digest
        "x",
    ],
)
def test_from_text_refuses_a_bad_manifest_line_naming_it(line):
    """A manifest line that is not `sha256  path` is refused, naming its line number."""
    with pytest.raises(ValueError, match="line 3 is not"):
        Seal.from_text("a" * 64 + "\n" + "c" * 64 + "  ok\n" + line + "\n")


# --- diff -------------------------------------------------------------------------------------------


def test_diff_names_changed_added_and_removed_files():
    """diff lists files whose hash changed, files only in the new tree and files only in the old one."""
    old = Seal(digest="0" * 64, manifest={"a/b": "1" * 64, "keep": "2" * 64, "gone": "3" * 64})
    new = Seal(digest="9" * 64, manifest={"a/b": "4" * 64, "keep": "2" * 64, "fresh": "5" * 64})
    d = old.diff(new)
    assert d == ManifestDiff(added=("fresh",), removed=("gone",), changed=("a/b",))
    assert d.files == ("a/b", "fresh", "gone")
    assert d.describe() == "changed a/b; added fresh; removed gone"


def test_diff_of_equal_manifests_is_empty():
    """Two equal manifests differ in no file."""
    assert SAMPLE.diff(SAMPLE) == ManifestDiff()


def test_diff_sorts_in_path_order():
    """Each diff list is in pathlib order (a/b before a-b/x)."""
    old = Seal(digest="0" * 64, manifest={"zz": "1" * 64})
    new = Seal(digest="0" * 64, manifest={"zz": "1" * 64, "a-b/x": "2" * 64, "a/b": "3" * 64})
    assert old.diff(new).added == ("a/b", "a-b/x")


def test_diff_against_a_digest_only_seal_names_nothing():
    """A recorded seal without a manifest cannot name files, and says so."""
    d = Seal(digest="0" * 64).diff(SAMPLE)
    assert d == ManifestDiff()
    assert d.describe() == "no file-level manifest to compare"


def test_diff_to_an_empty_tree_removes_everything():
    """Going from a full manifest to an empty tree lists every file as removed."""
    assert SAMPLE.diff(Seal(digest="0" * 64)).removed == ("a/b", "a-b/x", "z y.json")


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c/d", "c-d", "e"]), hexes, max_size=5),
    st.dictionaries(st.sampled_from(["a", "b", "c/d", "c-d", "e"]), hexes, max_size=5),
)
def test_diff_partitions_the_union_of_paths(old, new):
    """added, removed and changed are disjoint and cover exactly the paths whose entries differ."""
    d = Seal(digest="0" * 64, manifest=old).diff(Seal(digest="0" * 64, manifest=new))
    if not old:
        assert d == ManifestDiff()
        return
    differing = {p for p in old.keys() | new.keys() if old.get(p) != new.get(p)}
    assert set(d.files) == differing
    assert len(d.files) == len(differing)
