"""`gate reseal` through the command line's `main`, in process, on a temporary fixture tree: exit codes,
the JSON line, and that the seal file is touched only when --write asks for it. Needs no Docker.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gate.cli.main import main
from gate.core.errors import RET_BLOCKED, RET_CONFIG, RET_NOINPUT, RET_OK, RET_USAGE

OLD = 1_000_000_000  # an mtime far in the past, so any rewrite would show

Gate = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def gate(capsys: pytest.CaptureFixture[str]) -> Gate:
    """`gate ARGS...` in process: its exit code, stdout and stderr, as the console script would give them."""

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        argv = [str(arg) for arg in args]
        code = main(argv)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["gate", *argv], code, out, err)

    return run


@pytest.fixture
def reseal(gate: Gate) -> Gate:
    """`gate reseal ARGS...` in process."""
    return lambda *args: gate("reseal", *args)


def report(done: subprocess.CompletedProcess[str]) -> dict:
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    return json.loads(lines[0])


def one_error_line(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1 and lines[0].startswith("gate: error: "), lines
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small fixture tree with a nested file."""
    root = tmp_path / "fixtures"
    (root / "invoices").mkdir(parents=True)
    (root / "clock.json").write_text('{"frozen_at": "2026-03-01T00:00:00Z", "zone": "UTC"}\n')
    (root / "invoices" / "a.json").write_text('{"total": "1.00"}\n')
    (root / "invoices" / "b.json").write_text('{"total": "2.50"}\n')
    return root


@pytest.fixture
def sealed(tree: Path, tmp_path: Path, gate: Gate) -> Path:
    """The tree's seal file written by `gate seal --write`, with its mtime pushed into the past."""
    seal = tmp_path / ".fixture-seal"
    done = gate("seal", tree, "--write", seal)
    assert done.returncode == RET_OK, done.stderr
    os.utime(seal, (OLD, OLD))
    return seal


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_unchanged_tree_exits_zero_and_touches_nothing(tree: Path, sealed: Path, reseal: Gate) -> None:
    """An unchanged tree exits 0, prints changed=false with the digest, and leaves bytes and mtime alone."""
    before = snapshot(sealed)
    done = reseal(tree, "--seal", sealed)
    assert done.returncode == RET_OK, done.stderr
    assert report(done) == {"changed": False, "seal": sealed.read_text().splitlines()[0]}
    assert snapshot(sealed) == before


def test_unchanged_tree_with_write_touches_nothing(tree: Path, sealed: Path, reseal: Gate) -> None:
    """--write on a current seal rewrites nothing: bytes and mtime stay."""
    before = snapshot(sealed)
    done = reseal(tree, "--seal", sealed, "--write")
    assert done.returncode == RET_OK and report(done)["changed"] is False
    assert snapshot(sealed) == before


def test_changed_without_write_exits_one_and_names_files(tree: Path, sealed: Path, reseal: Gate) -> None:
    """A drifted tree without --write exits 1, names the changed, added and removed files, writes nothing."""
    before = snapshot(sealed)
    (tree / "invoices" / "a.json").write_text('{"total": "1.01"}\n')
    (tree / "invoices" / "b.json").unlink()
    (tree / "invoices" / "c.json").write_text("{}\n")
    done = reseal(tree, "--seal", sealed)
    assert done.returncode == RET_BLOCKED, done.stderr
    got = report(done)
    assert got["changed"] is True and got["written"] is False
    assert got["files"] == {
        "changed": ["invoices/a.json"],
        "added": ["invoices/c.json"],
        "removed": ["invoices/b.json"],
    }
    assert got["previous"] == before[0].decode().splitlines()[0]
    assert snapshot(sealed) == before


def test_changed_with_write_exits_zero_and_new_seal_verifies(
    tree: Path, sealed: Path, reseal: Gate, gate: Gate
) -> None:
    """--write on a drifted tree exits 0, and the new seal file holds the digest `gate seal` prints."""
    (tree / "invoices" / "a.json").write_text('{"total": "9.99"}\n')
    done = reseal(tree, "--seal", sealed, "--write")
    assert done.returncode == RET_OK, done.stderr
    got = report(done)
    assert got["written"] is True and got["files"]["changed"] == ["invoices/a.json"]
    printed = gate("seal", tree)
    assert printed.returncode == RET_OK
    assert sealed.read_text().splitlines()[0] == printed.stdout.strip() == got["seal"]
    again = reseal(tree, "--seal", sealed)
    assert again.returncode == RET_OK and report(again) == {"changed": False, "seal": got["seal"]}
    assert not [p for p in sealed.parent.iterdir() if p.name.startswith(f".{sealed.name}.")]  # no temp left


def test_missing_seal_without_write_is_noinput(tree: Path, tmp_path: Path, reseal: Gate) -> None:
    """A missing seal file without --write exits 66 naming it, and creates nothing."""
    seal = tmp_path / "missing-seal"
    one_error_line(reseal(tree, "--seal", seal), RET_NOINPUT, str(seal), "seal file not found")
    assert not seal.exists()


def test_missing_seal_with_write_creates_it(tree: Path, tmp_path: Path, reseal: Gate, gate: Gate) -> None:
    """A missing seal file with --write is created (exit 0), lists every file as added, and verifies."""
    seal = tmp_path / "new" / "seal"
    done = reseal(tree, "--seal", seal, "--write")
    assert done.returncode == RET_OK, done.stderr
    got = report(done)
    assert got["previous"] is None and got["written"] is True
    assert got["files"]["added"] == ["clock.json", "invoices/a.json", "invoices/b.json"]
    assert seal.read_text().splitlines()[0] == gate("seal", tree).stdout.strip()


def test_missing_fixture_dir_is_noinput(tmp_path: Path, sealed: Path, reseal: Gate) -> None:
    """A fixture directory that does not exist exits 66 naming it."""
    one_error_line(reseal(tmp_path / "nope", "--seal", sealed), RET_NOINPUT, "nope", "directory not found")


def test_malformed_seal_is_config_error_and_not_overwritten(tree: Path, tmp_path: Path, reseal: Gate) -> None:
    """A malformed seal file exits 65 even with --write, and keeps its bytes."""
    seal = tmp_path / "bad-seal"
    seal.write_text("not a digest\n")
    one_error_line(reseal(tree, "--seal", seal, "--write"), RET_CONFIG, str(seal), "not a seal file")
    assert seal.read_text() == "not a digest\n"


def test_seal_inside_tree_is_refused(tree: Path, reseal: Gate) -> None:
    """A seal file inside the tree it seals is a usage error, and nothing is written."""
    one_error_line(reseal(tree, "--seal", tree / ".seal", "--write"), RET_USAGE, "--seal", "outside the tree")
    assert not (tree / ".seal").exists()


def test_missing_seal_option_is_usage_error(tree: Path, reseal: Gate) -> None:
    """Leaving out --seal exits 64 with one error line."""
    one_error_line(reseal(tree), RET_USAGE, "--seal")
