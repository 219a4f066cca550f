"""The books where consecutive CI jobs see them: the Redis store (gate.io.redisbooks.RedisBooks) on a
private redis-server refuses what the file store refuses and loses nothing to concurrent updates; an
unreachable Redis refuses the run with exit 2 before any container; and two concurrent `gate run`
processes on one ledger (file or Redis) both land their window entries."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from gate_runs import EXAMPLE, NOISY_SEEDS, gate_run
from support.servers import RedisServer, unserved_port

from gate.core.errors import (
    RET_CONFIG,
    RET_HARNESS,
    RET_NOINPUT,
    RET_OK,
    RET_USAGE,
    BrokerError,
    ConfigError,
    InputMissingError,
    UsageError,
)
from gate.core.policy.history import HistoryEntry, record
from gate.core.policy.ledger import Ledger
from gate.core.suite.suite import LedgerConfig, SamplerConfig
from gate.core.verdicts.bands import SamplerWindow
from gate.io.redisbooks import RedisBooks, split_books_url

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
TERMS = (LedgerConfig(), SamplerConfig())  # budget 2; window 20
KEY = "probegate:books:tiny"


def store(url: str, *, create: bool = False) -> RedisBooks:
    return RedisBooks(url, *TERMS, suite_name="tiny", create=create)


def one_run(pid: str):
    """What one run does at decision time: draw a credit for `pid`, push one window entry."""

    def fn(ledger: Ledger, window: SamplerWindow) -> tuple[str, Ledger, SamplerWindow]:
        ledger, entry = ledger.draw(pid, "fault", NOW)
        return entry.action, ledger, window.push([True])

    return fn


def keep(ledger: Ledger, window: SamplerWindow) -> tuple[None, Ledger, SamplerWindow]:
    """An update that writes the books as they are: how a test starts empty books."""
    return None, ledger, window


def stored(url: str, key: str = KEY) -> dict:
    return json.loads(redis.Redis.from_url(url).get(key))


def credit(pid: str, remaining: int) -> dict:
    expires = (NOW + timedelta(hours=1)).isoformat()
    return {"property_id": pid, "remaining": remaining, "expires_at": expires, "last_detail": "d"}


def test_new_books_are_written_by_the_first_update(redis_server: RedisServer) -> None:
    """With --new-ledger an absent key passes check() unwritten; the first update creates it under the suite's key."""
    books = store(redis_server.url, create=True)
    books.check()
    assert redis.Redis.from_url(redis_server.url).exists(KEY) == 0
    assert books.update(one_run("p")) == "freeze_opened"
    assert stored(redis_server.url)["sampler_window"] == [True]
    assert store(redis_server.url).update(one_run("p")) == "freeze_consumed"
    assert stored(redis_server.url)["credits"]["p"]["remaining"] == 0


def test_the_url_fragment_names_the_key(redis_server: RedisServer) -> None:
    """`redis://…/0#team%3Abooks` keeps the books under `team:books`, and errors name that key."""
    url = redis_server.url + "#team%3Abooks"
    store(url, create=True).update(one_run("p"))
    assert stored(redis_server.url, "team:books")["credits"]["p"]["remaining"] == 1
    assert store(url).where.endswith("#team:books")


def test_a_missing_key_is_refused_with_a_hint(redis_server: RedisServer) -> None:
    """Without --new-ledger a missing key exits 66 naming the key and saying to pass --new-ledger."""
    for call in (lambda: store(redis_server.url).check(), lambda: store(redis_server.url).update(one_run("p"))):
        with pytest.raises(InputMissingError) as info:
            call()
        assert info.value.exit_code == RET_NOINPUT
        assert KEY in str(info.value) and "--new-ledger" in str(info.value)
    assert redis.Redis.from_url(redis_server.url).exists(KEY) == 0


def test_new_books_over_existing_ones_are_refused(redis_server: RedisServer) -> None:
    """--new-ledger where the key exists exits 64 naming the key and --new-ledger, and leaves the books alone."""
    store(redis_server.url, create=True).update(one_run("p"))
    before = stored(redis_server.url)
    with pytest.raises(UsageError) as info:
        store(redis_server.url, create=True).check()
    assert info.value.exit_code == RET_USAGE and KEY in str(info.value) and "--new-ledger" in str(info.value)
    assert stored(redis_server.url) == before


def history_entry(run: int, kind: str = "pass") -> HistoryEntry:
    return HistoryEntry(
        run_id=f"run-{run}", at=NOW + timedelta(minutes=run), seal="a" * 64, kind=kind, trials=1, hits=1
    )


def test_the_history_rides_with_the_ledger_in_one_transaction(redis_server: RedisServer) -> None:
    """Concurrent updates each recording a run in the history, beside a credit draw, lose no entry."""
    store(redis_server.url, create=True).update(keep)

    def one(run: int) -> None:
        store(redis_server.url).update(one_run(f"p{run % 2}"), history=lambda h: record(h, {"p": history_entry(run)}))

    with ThreadPoolExecutor(max_workers=10) as pool:
        list(pool.map(one, range(10)))
    books = stored(redis_server.url)
    assert books["version"] == 2
    assert sorted(e["run_id"] for e in books["history"]["p"]) == sorted(f"run-{r}" for r in range(10))
    assert len(books["sampler_window"]) == 10


def test_old_books_load_and_corrupt_history_is_refused(redis_server: RedisServer) -> None:
    """Books with no history load; a history entry that is not an entry exits 65 naming the key."""
    client = redis.Redis.from_url(redis_server.url)
    client.set(KEY, json.dumps({"credits": {}, "sampler_window": [True]}))
    store(redis_server.url).update(keep, history=lambda h: record(h, {"p": history_entry(1)}))
    assert len(stored(redis_server.url)["history"]["p"]) == 1
    client.set(KEY, json.dumps({"version": 2, "credits": {}, "history": {"p": [{"run_id": "r"}]}}))
    with pytest.raises(ConfigError) as info:
        store(redis_server.url).check()
    assert info.value.exit_code == RET_CONFIG and KEY in str(info.value)


def test_a_credit_above_the_budget_is_refused(redis_server: RedisServer) -> None:
    """A stored credit with more remaining than the budget exits 65 naming the key and the property."""
    redis.Redis.from_url(redis_server.url).set(KEY, json.dumps({"credits": {"p": credit("p", 5)}}))
    for call in (lambda: store(redis_server.url).check(), lambda: store(redis_server.url).update(one_run("p"))):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.exit_code == RET_CONFIG and KEY in str(info.value) and "credits.p" in str(info.value)


@pytest.mark.parametrize("kind", ["not_json", "not_books", "a_hash"])
def test_corrupt_books_are_refused_naming_the_key(redis_server: RedisServer, kind: str) -> None:
    """A value that is not JSON, not books, or a key of another Redis type exits 65 naming the key."""
    client = redis.Redis.from_url(redis_server.url)
    if kind == "a_hash":
        client.hset(KEY, "credits", "{}")
    else:
        client.set(KEY, b"{" if kind == "not_json" else b'{"credits": [1]}')
    for call in (lambda: store(redis_server.url).check(), lambda: store(redis_server.url).update(one_run("p"))):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.exit_code == RET_CONFIG and KEY in str(info.value)


def test_threads_updating_at_once_lose_nothing(redis_server: RedisServer) -> None:
    """20 threads each drawing a credit for its own property and pushing one entry: all 20 land."""
    store(redis_server.url, create=True).update(keep)
    with ThreadPoolExecutor(max_workers=20) as pool:
        actions = list(pool.map(lambda i: store(redis_server.url).update(one_run(f"p{i}")), range(20)))
    assert actions == ["freeze_opened"] * 20
    assert set(stored(redis_server.url)["credits"]) == {f"p{i}" for i in range(20)}
    assert stored(redis_server.url)["sampler_window"] == [True] * 20


def _update_in_child(url: str, pid: str, start: multiprocessing.synchronize.Event) -> None:
    start.wait(10)
    store(url).update(one_run(pid))  # its own connection, made after the fork


def test_processes_updating_at_once_lose_nothing(redis_server: RedisServer) -> None:
    """20 processes released together, each drawing a credit for its own property and pushing one entry: all land."""
    store(redis_server.url, create=True).update(keep)
    context = multiprocessing.get_context("fork")
    start = context.Event()
    procs = [context.Process(target=_update_in_child, args=(redis_server.url, f"p{i}", start)) for i in range(20)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0] * 20
    assert set(stored(redis_server.url)["credits"]) == {f"p{i}" for i in range(20)}
    assert stored(redis_server.url)["sampler_window"] == [True] * 20


def test_an_unreachable_redis_is_a_harness_error(redis_server: RedisServer) -> None:
    """A store whose Redis is gone refuses check() and update() with BrokerError (exit 2) naming it."""
    store(redis_server.url, create=True).update(one_run("p"))
    redis_server.stop()
    with unserved_port(redis_server.port):  # no other test's server may take the port meanwhile
        for call in (lambda: store(redis_server.url).check(), lambda: store(redis_server.url).update(one_run("p"))):
            with pytest.raises(BrokerError) as info:
                call()
            assert info.value.exit_code == RET_HARNESS and f"127.0.0.1:{redis_server.port}" in str(info.value)


def test_where_never_shows_the_password() -> None:
    """The name errors give a Redis store keeps host, port, db and key, never the password."""
    _, key, where = split_books_url("rediss://:s3cret@cache.example:6380/2?ssl_cert_reqs=required", "invoice")
    assert (key, where) == ("probegate:books:invoice", "rediss://cache.example:6380/2#probegate:books:invoice")
    with pytest.raises(UsageError, match="--ledger"):
        split_books_url("redis://host:port/0")


# ---------------------------------------------------------------- through the command line


def gate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "gate.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)


def run_args(card: Path, *extra: str) -> list[str]:
    return [
        *("run", "--suite", str(EXAMPLE / "gate.toml"), "--workdir", str(EXAMPLE / "patches" / "good")),
        *("--seal", str(EXAMPLE / ".fixture-seal"), "--card", str(card), *extra),
    ]


def refused(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """One `gate: error:` line, the exit code, nothing judged (no stdout line)."""
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == code, done.stderr
    assert len(lines) == 1 and lines[0].startswith("gate: error: "), lines
    assert all(needle in lines[0] for needle in needles), lines[0]
    assert done.stdout == ""


def test_cli_refuses_an_unreachable_redis_ledger_before_any_container(tmp_path: Path) -> None:
    """`gate run --ledger redis://` on a port nobody serves exits 2 in one line naming it, with no card."""
    with unserved_port() as port:
        url = f"redis://127.0.0.1:{port}/0"
        refused(gate(*run_args(tmp_path / "card.json", "--ledger", url)), RET_HARNESS, "cannot reach the ledger", url)
    assert not (tmp_path / "card.json").exists()


def test_cli_refuses_a_missing_or_clobbered_redis_ledger(redis_server: RedisServer, tmp_path: Path) -> None:
    """A missing key exits 66 hinting --new-ledger; --new-ledger on an existing key exits 64; a URL of
    another scheme exits 64."""
    card = tmp_path / "card.json"
    key = "probegate:books:invoice"
    refused(gate(*run_args(card, "--ledger", redis_server.url)), RET_NOINPUT, key, "--new-ledger")
    redis.Redis.from_url(redis_server.url).set(key, json.dumps({"credits": {}, "sampler_window": []}))
    refused(gate(*run_args(card, "--ledger", redis_server.url, "--new-ledger")), RET_USAGE, key, "--new-ledger")
    refused(gate(*run_args(card, "--ledger", "http://127.0.0.1/0")), RET_USAGE, "--ledger")
    assert not card.exists()


@pytest.mark.parametrize("where", ["file", "redis"])
def test_two_concurrent_runs_on_one_ledger_both_land(
    tmp_path: Path, sandbox_image: str, where: str, request: pytest.FixtureRequest
) -> None:
    """Two `gate run` processes of the noisy_sampler patch at once on one ledger both land their window
    entry: the window holds 2 after both."""
    if where == "redis":  # empty books under the suite's default key, probegate:books:invoice
        ledger = request.getfixturevalue("redis_server").url
        RedisBooks(ledger, *TERMS, suite_name="invoice", create=True).update(keep)
        read = lambda: stored(ledger, "probegate:books:invoice")  # noqa: E731
    else:
        path = tmp_path / "books" / "ledger.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"credits": {}, "sampler_window": []}))
        ledger, read = str(path), lambda: json.loads(path.read_text())
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(
            pool.map(
                lambda name: gate_run(
                    EXAMPLE, "noisy_sampler", tmp_path / name / "card.json", "--ledger", ledger, *NOISY_SEEDS
                ),
                ["a", "b"],
            )
        )
    assert [run.code for run in runs] == [RET_OK, RET_OK], [run.stderr for run in runs]
    assert read()["sampler_window"] == [True, True]
    # Each card records the books it decided on: one run saw none, the other saw the first's entry.
    assert sorted(len(run.card["policy"]["window_before"]["recent"]) for run in runs) == [0, 1]


def test_the_nightly_pair_keeps_its_history_in_redis(redis_server: RedisServer, tmp_path: Path) -> None:
    """`gate baseline --twice` over a Redis ledger records both runs under the suite's key and names a
    contract property that changed colour between them with both run ids."""
    import io
    from dataclasses import replace

    from support.mini_suite import CONTRACT, NOW, build_suite, good, stdout

    from gate.core.suite.trial import Observation
    from gate.run.baseline import run_baseline
    from gate.run.executors.mock import MockExecutor

    suite = build_suite(tmp_path)
    calls: dict[int, int] = {}

    def handler(spec, fixture):
        if spec.property_id != CONTRACT:
            return good(spec, fixture)
        calls[spec.trial_index] = calls.get(spec.trial_index, 0) + 1
        if calls[spec.trial_index] == 1:
            return good(spec, fixture)
        return Observation.of(spec, exit_code=0, stdout=stdout({"total": "0.00"}))

    def books(request, loaded):
        config = loaded.config
        return RedisBooks(redis_server.url, config.ledger, config.sampler, suite_name=config.name, create=True)

    executor = MockExecutor(handler)
    code = run_baseline(
        replace(suite.request, new_ledger=True),
        tmp_path / "calibration.json",
        out=io.StringIO(),
        now=lambda: NOW,
        executor_factory=lambda _: executor,
        twice=True,
        books_factory=books,
        run_ids=("night-1", "night-2"),
    )
    assert code == 1
    history = stored(redis_server.url)["history"]
    assert [e["run_id"] for e in history[CONTRACT]] == ["night-1", "night-2"]
    assert [e["kind"] for e in history[CONTRACT]] == ["pass", "fail_contract"]
    reason = json.loads((suite.card.parent / "freeze-proposal.json").read_text())["freezes"][0]["reason"]
    assert "night-1" in reason and "night-2" in reason
