"""gate.core.suite.seal.compute_tree: the patched tree's digest, symlinks included, with no file/link collision."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from gate.core.suite.seal import FRAMED_TREE, compute, compute_tree


def files_only(files: dict[str, bytes]) -> str:
    return compute(files, lambda rel: [files[rel]]).digest


def tree(files: dict[str, bytes], links: dict[str, str] | None = None) -> str:
    return compute_tree(files, lambda rel: [files[rel]], links).digest


# Plain text strategies, not from_regex (twice their cost per example), for the same languages.
LOWER = "abcdefghijklmnopqrstuvwxyz"
TEXT = st.dictionaries(
    st.lists(st.text(LOWER, min_size=1, max_size=3), min_size=1, max_size=3).map("/".join),  # [a-z]{1,3}(/...){0,2}
    st.binary(max_size=40).map(lambda data: data.replace(b"\0", b"")),
    max_size=6,
)


@given(TEXT)
def test_a_tree_of_text_files_seals_as_the_note_recipe(files: dict[str, bytes]) -> None:
    """Files holding no NUL byte and no link: the patched tree's digest is the fixture recipe's, byte for byte."""
    assert tree(files) == files_only(files)


def test_a_file_holding_framing_bytes_does_not_seal_like_two_files() -> None:
    """The note's stream cannot tell `x\\0b.py\\0y` in one file from two files; the patched tree's digest can."""
    one = {"a.txt": b"hello\0b.py\0EVIL = 1"}
    two = {"a.txt": b"hello", "b.py": b"EVIL = 1"}
    assert files_only(one) == files_only(two)  # the recipe's known ambiguity, kept for fixture seals
    assert tree(one) != tree(two)


def test_a_link_never_seals_like_a_file_naming_its_target_or_holding_its_bytes() -> None:
    """A tracked file turned into a symlink to another file of the tree changes the digest, whatever the
    plain file held: the target's name, the target's bytes, or the framed entry's own bytes."""
    real = {"real.py": b"X = 1\n"}
    linked = tree(real, {"a.py": "real.py"})
    assert linked != tree({**real, "a.py": b"real.py"})
    assert linked != tree({**real, "a.py": b"X = 1\n"})
    assert linked != tree({**real, "a.py": b"symlink\0real.py"})


def test_the_framed_recipe_starts_with_a_nul_no_path_can() -> None:
    """Any tree sealed by the framed recipe hashes a stream opening with NUL; the note's stream opens with a path."""
    files = {"a": b"\0"}
    framed = hashlib.sha256(FRAMED_TREE)
    framed.update(b"f" + (1).to_bytes(8, "big") + b"a" + hashlib.sha256(b"\0").digest())
    assert tree(files) == framed.hexdigest()


def test_a_link_is_named_in_the_manifest_by_its_target() -> None:
    """The manifest lists links beside files, and a changed target shows as a changed entry."""
    before = compute_tree({}, lambda rel: [], {"docs/latest": "v2"})
    after = compute_tree({}, lambda rel: [], {"docs/latest": "v1"})
    assert set(before.manifest) == {"docs/latest"}
    assert before.digest != after.digest
    assert before.diff(after).changed == ("docs/latest",)


KIND = st.one_of(
    st.binary(max_size=8).map(lambda data: ("f", data)),
    st.text(LOWER + ".", min_size=1, max_size=4).map(lambda target: ("l", target)),
)


@given(
    st.dictionaries(st.text("abc", min_size=1, max_size=2), KIND, max_size=4),
    st.dictionaries(st.text("abc", min_size=1, max_size=2), KIND, max_size=4),
)
def test_different_trees_seal_differently(first: dict, second: dict) -> None:
    """Two trees of files and links have equal digests only when they are the same tree."""

    def seal(entries: dict) -> str:
        files = {p: v for p, (k, v) in entries.items() if k == "f"}
        links = {p: v for p, (k, v) in entries.items() if k == "l"}
        return tree(files, links)

    assert (seal(first) == seal(second)) == (first == second)
