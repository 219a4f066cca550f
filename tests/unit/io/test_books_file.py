"""gate.io.ledgerfile.FileBooks: the books in one locked file. Never silently fresh, never a fresh
store over real books, refused when corrupt or edited past the budget, and concurrent updates
(threads and processes) lose nothing."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gate.core.errors import RET_CONFIG, RET_NOINPUT, RET_USAGE, ConfigError, InputMissingError, UsageError
from gate.core.policy.ledger import Ledger
from gate.core.suite.suite import LedgerConfig, SamplerConfig
from gate.core.verdicts.bands import SamplerWindow
from gate.io.bookstore import MemoryBooks, encode_books
from gate.io.ledgerfile import FileBooks

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
TERMS = (LedgerConfig(), SamplerConfig())  # budget 2, TTL 6 h; window 20, 4 inconclusive allowed


def store(path: Path, *, create: bool = False) -> FileBooks:
    return FileBooks(path, *TERMS, create=create)


def one_run(pid: str) -> object:
    """What one run does at decision time: draw a credit for `pid`, push one window entry."""

    def fn(ledger: Ledger, window: SamplerWindow) -> tuple[str, Ledger, SamplerWindow]:
        ledger, entry = ledger.draw(pid, "fault", NOW)
        return entry.action, ledger, window.push([True])

    return fn


def books(path: Path) -> dict:
    return json.loads(path.read_text())


def write_books(path: Path, credits: dict) -> None:
    path.write_text(json.dumps({"credits": credits, "sampler_window": []}))


def credit(pid: str, remaining: int) -> dict:
    expires = (NOW + timedelta(hours=1)).isoformat()
    return {"property_id": pid, "remaining": remaining, "expires_at": expires, "last_detail": "d"}


def test_new_books_are_written_by_the_first_update_only(tmp_path: Path) -> None:
    """With --new-ledger an absent file passes check() without being written; the first update creates it."""
    path = tmp_path / "out" / "ledger.json"
    books_store = store(path, create=True)
    books_store.check()
    assert not path.exists()
    assert books_store.update(one_run("p")) == "freeze_opened"
    assert books(path)["sampler_window"] == [True]
    assert books(path)["credits"]["p"]["remaining"] == 1


def test_a_missing_file_is_refused_with_a_hint(tmp_path: Path) -> None:
    """Without --new-ledger a missing ledger file exits 66 naming it and saying to pass --new-ledger."""
    path = tmp_path / "ledger.json"
    with pytest.raises(InputMissingError) as info:
        store(path).check()
    assert info.value.exit_code == RET_NOINPUT
    assert str(path) in str(info.value) and "--new-ledger" in str(info.value)
    with pytest.raises(InputMissingError):
        store(path).update(one_run("p"))
    assert not path.exists()


def test_new_books_over_existing_ones_are_refused(tmp_path: Path) -> None:
    """--new-ledger where a ledger file exists exits 64 naming it and --new-ledger, and leaves it untouched."""
    path = tmp_path / "ledger.json"
    store(path, create=True).update(one_run("p"))
    before = path.read_bytes()
    with pytest.raises(UsageError) as info:
        store(path, create=True).check()
    assert info.value.exit_code == RET_USAGE
    assert str(path) in str(info.value) and "--new-ledger" in str(info.value)
    assert path.read_bytes() == before


def test_a_later_run_reads_the_books_an_earlier_one_wrote(tmp_path: Path) -> None:
    """A second run's update sees the first's credit and window entry and adds to them."""
    path = tmp_path / "ledger.json"
    store(path, create=True).update(one_run("p"))
    again = store(path)
    again.check()
    assert again.update(one_run("p")) == "freeze_consumed"
    assert books(path)["sampler_window"] == [True, True]
    assert books(path)["credits"]["p"]["remaining"] == 0


def test_a_credit_above_the_budget_is_refused(tmp_path: Path) -> None:
    """A stored credit with more remaining than [suite.ledger] budget exits 65 naming the file and property."""
    path = tmp_path / "ledger.json"
    write_books(path, {"p": credit("p", 3)})
    for call in (lambda: store(path).check(), lambda: store(path).update(one_run("p"))):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.exit_code == RET_CONFIG
        assert str(path) in str(info.value) and "credits.p" in str(info.value) and "budget 2" in str(info.value)


def test_a_credit_filed_under_another_property_is_refused(tmp_path: Path) -> None:
    """A credit stored under a key that is not its property id exits 65 naming both."""
    path = tmp_path / "ledger.json"
    write_books(path, {"p": credit("q", 1)})
    with pytest.raises(ConfigError, match=r"credits\.p: holds the credit of 'q'"):
        store(path).check()


@pytest.mark.parametrize("data", [b"{", b'{"credits": []}', b'{"extra": 1}', b"\xff"])
def test_a_corrupt_file_is_refused_naming_it(tmp_path: Path, data: bytes) -> None:
    """Bytes that are not a ledger exit 65 naming the file, at check() and at update(), and stay as they were."""
    path = tmp_path / "ledger.json"
    path.write_bytes(data)
    for call in (lambda: store(path).check(), lambda: store(path).update(one_run("p"))):
        with pytest.raises(ConfigError) as info:
            call()
        assert str(path) in str(info.value)
    assert path.read_bytes() == data


def test_a_stored_window_is_cut_to_the_suite_window(tmp_path: Path) -> None:
    """A window stored longer than the suite's keeps only its newest entries."""
    path = tmp_path / "ledger.json"
    path.write_bytes(encode_books(Ledger(), SamplerWindow(size=30).push([False] * 25 + [True])))
    FileBooks(path, LedgerConfig(), SamplerConfig(window=5)).update(one_run("p"))
    assert books(path)["sampler_window"] == [False, False, False, True, True]


def test_threads_updating_at_once_lose_nothing(tmp_path: Path) -> None:
    """20 threads each drawing a credit for its own property and pushing one entry: all 20 land."""
    path = tmp_path / "ledger.json"
    store(path, create=True).update(lambda ledger, window: (None, ledger, window))
    with ThreadPoolExecutor(max_workers=20) as pool:
        actions = list(pool.map(lambda i: store(path).update(one_run(f"p{i}")), range(20)))
    assert actions == ["freeze_opened"] * 20
    assert set(books(path)["credits"]) == {f"p{i}" for i in range(20)}
    assert books(path)["sampler_window"] == [True] * 20


def _update_in_child(path: str, pid: str, start: multiprocessing.synchronize.Event) -> None:
    start.wait(10)
    store(Path(path)).update(one_run(pid))


def test_processes_updating_at_once_lose_nothing(tmp_path: Path) -> None:
    """20 processes released together, each drawing a credit for its own property and pushing one entry: all 20 land."""
    path = tmp_path / "ledger.json"
    store(path, create=True).update(lambda ledger, window: (None, ledger, window))
    context = multiprocessing.get_context("fork")
    start = context.Event()
    procs = [context.Process(target=_update_in_child, args=(str(path), f"p{i}", start)) for i in range(20)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(30)
    assert [proc.exitcode for proc in procs] == [0] * 20
    assert set(books(path)["credits"]) == {f"p{i}" for i in range(20)}
    assert books(path)["sampler_window"] == [True] * 20


def test_memory_books_start_fresh_and_keep_updates() -> None:
    """The baseline's scratch books start empty, need nothing to exist, and keep what updates wrote."""
    memory = MemoryBooks(*TERMS)
    memory.check()
    assert memory.update(one_run("p")) == "freeze_opened"
    assert memory.update(one_run("p")) == "freeze_consumed"
    assert memory.window.recent == (True, True)
