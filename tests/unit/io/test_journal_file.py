"""The run journal on disk (gate.io.journal): read back line for line, its torn last line cut off before
a resume appends, locked against a second writer, and under hostile bytes only ever one clean
JournalError (or another GateError) line, never another exception."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.core.errors import GateError, JournalError
from gate.core.suite.journal import JournalHeader, trial_line
from gate.core.suite.trial import Observation
from gate.core.testing import make_spec
from gate.io.journal import journal_path, new_journal, read_journal

HEADER = JournalHeader(
    run_id="r", suite="s", checks="", tree="t", seal="f", image="i", image_id="sha256:x", properties=("p",)
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def written(folder: Path, trials: int) -> Path:
    """A journal with `trials` trial lines, closed (as a killed run leaves it)."""
    path = journal_path(folder / "card.json", folder / "state")
    writer = new_journal(path, HEADER)
    for index in range(trials):
        spec = make_spec(index)
        writer.append(trial_line(writer.chain, spec, Observation.of(spec, exit_code=0)))
    writer.close()
    return path


def test_a_journal_reads_back_and_appends_after_its_torn_line_is_cut(tmp_path: Path) -> None:
    """A torn last line is dropped on reading and cut off the file, so the next append starts a whole line."""
    path = written(tmp_path, 3)
    with path.open("ab") as handle:
        handle.write(b'{"property": "p", "ind')
    found = read_journal(path)
    assert found is not None
    journal, writer = found
    assert len(journal.stored) == 3
    spec = make_spec(3)
    writer.append(trial_line(writer.chain, spec, Observation.of(spec, exit_code=1)))
    writer.close()
    again = read_journal(path)
    assert again is not None and len(again[0].stored) == 4
    again[1].close()
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_no_journal_is_none_and_a_locked_one_is_refused(tmp_path: Path) -> None:
    """Nothing at the path: None. A journal another writer holds: refused, naming the file."""
    assert read_journal(journal_path(tmp_path / "card.json", tmp_path / "state")) is None
    path = written(tmp_path, 1)
    found = read_journal(path)
    assert found is not None
    with pytest.raises(JournalError, match="another gate run is writing this journal now") as caught:
        read_journal(path)
    assert caught.value.file == str(path)
    found[1].close()


def test_a_journal_that_is_a_link_is_refused(tmp_path: Path) -> None:
    """A symlink at the journal's path is not followed (it could lead to another run's journal)."""
    (tmp_path / "elsewhere").mkdir()
    real = written(tmp_path / "elsewhere", 1)
    link = journal_path(tmp_path / "card.json", tmp_path / "state")
    link.parent.mkdir(parents=True)
    os.symlink(real, link)
    with pytest.raises(GateError, match="cannot open the run journal"):
        read_journal(link)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"a": NaN}', "line 3: not JSON: NaN is not a number"),
        ('{"a": 1e400}', "line 3: not JSON: a number beyond the float range"),
        ('{"a": ' + "9" * 20 + "}", "line 3: not JSON: a number beyond ±2\\*\\*53"),
        ("[" * 5000 + "]" * 5000, "line 3: not JSON: nested too deeply"),
        ("[1, 2]", "line 3: not a JSON object"),
        ('{"a": "\\ud800", "chain": "x"}', "line 3: holds text that cannot be written back"),
    ],
)
def test_hostile_lines_are_refused_in_one_line(tmp_path: Path, line: str, said: str) -> None:
    """NaN, infinities, huge numbers, deep nesting, a non-object, a lone surrogate: each one JournalError."""
    path = written(tmp_path, 1)
    with path.open("a") as handle:
        handle.write(line + "\n")
    with pytest.raises(JournalError, match=said) as caught:
        read_journal(path)
    assert len(str(caught.value).splitlines()) == 1


@FUZZ
@given(blob=st.binary(max_size=400), cut=st.integers(0, 2000))
def test_arbitrary_bytes_read_or_fail_in_one_clean_line(blob: bytes, cut: int) -> None:
    """A journal's bytes cut anywhere and followed by anything: it reads, or fails as one printable GateError."""
    with tempfile.TemporaryDirectory(prefix="probegate-journal-") as tmp:
        path = written(Path(tmp), 2)
        data = path.read_bytes()
        path.write_bytes(data[: cut % (len(data) + 1)] + blob)
        try:
            found = read_journal(path)
        except GateError as exc:
            text = str(exc)
            assert len(text.splitlines()) == 1 and all(c.isprintable() for c in text), text
        else:
            if found is not None:
                found[1].close()


def test_a_journal_read_but_not_appended_to_keeps_its_torn_line(tmp_path: Path) -> None:
    """A resume refused after reading (another tree, say) leaves the file byte for byte as it was."""
    path = written(tmp_path, 2)
    with path.open("ab") as handle:
        handle.write(b'{"torn"')
    before = path.read_bytes()
    found = read_journal(path)
    assert found is not None
    found[1].close()
    assert path.read_bytes() == before
