"""Every leaf value of a real card, replaced by a hostile one, is either read and used (accept, diff,
refold, evidence, report) or refused as one clean error line with a documented exit code: no traceback, no exit 70.
Numbers are bounded and dates aware where the card is read (gate.core.card.card.VerdictCard)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.mini_suite import Suite, build_suite, good, run

from gate.cli.arguments import build_parser
from gate.cli.main import main
from gate.core.errors import RET_INTERNAL

DOCUMENTED = {0, 1, 2, 3, 64, 65, 66}
HOSTILE = [
    "1e300", "-1e300", "Infinity", "-Infinity", "NaN", "-1", "0", "1" + "0" * 400, "-" + "9" * 400, "0.5",
    "2147483648", "9007199254740993", '"2026-03-01T00:00:00"', '"9999-12-31T23:59:59Z"', '"0001-01-01T00:00:00Z"',
    '"0001-01-01T00:00:00+14:00"', '"a\\u001b[31m\\nb"', '"\\ud800"', '""', "null", "true", "[]", "{}",
    '"' + "/".join(["a"] * 400) + '"', '"' + "/".join(["a"] * 200) + '"', "[" * 3000 + "]" * 3000,
]  # fmt: skip

NUMBERS = [value for value in HOSTILE if not value.startswith(('"', "[", "{", "n", "t"))]


@pytest.fixture(scope="module", autouse=True)
def one_parser() -> Iterator[None]:
    """`main` builds the same argparse parser afresh on every call (about 10 ms, 85% of this module's time
    over 1,800 calls): build it once here, as the cards vary and the flags do not."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importlib.import_module("gate.cli.main"), "build_parser", functools.cache(build_parser))
        yield


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Suite, dict]:
    suite = build_suite(tmp_path_factory.mktemp("suite"))
    run(suite, good)
    return suite, json.loads(suite.card.read_text())


def leaves(value: object, path: tuple = ()) -> Iterator[tuple]:
    """Every path to a leaf (a scalar, or an empty list or object) of a JSON document."""
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from leaves(inner, (*path, key))
    elif isinstance(value, list) and value:
        for index, inner in enumerate(value):
            yield from leaves(inner, (*path, index))
    else:
        yield path


MARK = "\x00HOLE\x00"


def replaced(document: dict, path: tuple, raw: str) -> str:
    """The document as JSON text with the leaf at `path` replaced by the raw JSON text `raw`."""
    copy = json.loads(json.dumps(document))
    holder = copy
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = MARK
    return json.dumps(copy).replace(json.dumps(MARK), raw, 1)


def gate(*argv: str) -> tuple[int, str]:
    """The exit code, and what reached the terminal: stderr, and stdout (diff's text, accept's JSON)."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, err.getvalue() + out.getvalue()


def commands(suite: Suite, card: Path, out: Path) -> list[list[str]]:
    root = suite.request.suite.parent
    return [
        ["accept", "--card", str(card), "--seal", str(root / "fixtures.seal"), "--workdir", str(root / "work"),
         "--suite", str(root / "gate.toml"), "--allow-unchecked-oracle"],
        ["diff", str(suite.card), str(card)],
        ["diff", "--json", str(card), str(suite.card)],
        ["refold", str(card)],
        ["evidence", str(card)],
        ["report", str(card), "--report-html", str(out / "r.html"), "--junitxml", str(out / "r.xml"),
         "--summary-md", str(out / "r.md")],
    ]  # fmt: skip


def assert_clean_run(argv: list[str]) -> None:
    code, err = gate(*argv)
    assert code != RET_INTERNAL and code in DOCUMENTED, (argv[0], code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    for line in err.splitlines():
        assert all(c.isprintable() for c in line), line  # nothing from the card drives the terminal


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_every_leaf_of_the_card_holds_hostile_values(
    made: tuple[Suite, dict], tmp_path: Path, data: st.DataObject
) -> None:
    suite, document = made
    path = data.draw(st.sampled_from(list(leaves(document))), label="leaf")
    holder = document
    for key in path:
        holder = holder[key]
    # A number's leaf mostly gets hostile numbers, a string's hostile text: what a reader must bound.
    kind = NUMBERS if isinstance(holder, int | float) and not isinstance(holder, bool) else HOSTILE
    raw = data.draw(st.one_of(st.sampled_from(kind), st.sampled_from(HOSTILE)), label="value")
    card = tmp_path / "card.json"
    card.write_text(replaced(document, path, raw))
    evidence = suite.card.parent / "evidence"
    if evidence.exists() and not (tmp_path / "evidence").exists():
        shutil.copytree(evidence, tmp_path / "evidence")
    for argv in commands(suite, card, tmp_path):
        assert_clean_run(argv)
