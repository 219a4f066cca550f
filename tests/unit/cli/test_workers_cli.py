"""`gate workers` and the run's registry choice, without a broker: enrol, list, revoke, their one-line
refusals and exit codes, and how a run with --broker checks results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.cli.executors import enrolled_workers
from gate.cli.main import main
from gate.core.errors import RET_CONFIG, RET_NOINPUT, RET_USAGE, ConfigError, InputMissingError
from gate.io.keys import write_new_key
from worker.celery.worker.settings import PoolSettings, configure


def lines(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_enrol_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Enrol prints the key id, list shows every key, revoke marks it revoked and keeps it listed."""
    key = write_new_key(tmp_path / "w.key")
    reg = ["--workers", str(tmp_path / "workers.json")]
    assert main(["workers", "enrol", str(tmp_path / "w.key.pub"), "--name", "box1", *reg]) == 0
    assert lines(capsys)[0]["key_id"] == key.key_id
    assert main(["workers", "revoke", "box1", *reg]) == 0
    assert lines(capsys)[0]["state"] == "revoked"
    assert main(["workers", "list", *reg]) == 0
    assert [(r["name"], r["state"]) for r in lines(capsys)] == [("box1", "revoked")]


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["enrol", "{dir}/w.key", "--name", "b"], RET_CONFIG, "not a PEM public key"),  # the private half
        (["enrol", "{dir}/none.pub", "--name", "b"], RET_NOINPUT, "key file not found"),
        (["enrol", "{dir}/w.key.pub", "--name", "a b"], RET_USAGE, "--name"),
        (["enrol", "{dir}/w.key.pub", "--name", "b", "--redis-admin-url", "http://x"], RET_USAGE, "redis://"),
        (["revoke", "nobody"], RET_NOINPUT, "worker registry not found"),
    ],
)
def test_refusals(argv: list[str], code: int, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each mistake is one line naming what is wrong, with its documented exit code, and no traceback."""
    write_new_key(tmp_path / "w.key")
    args = [a.format(dir=tmp_path) for a in argv]
    assert main(["workers", *args, "--workers", str(tmp_path / "workers.json")]) == code
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_broker_run_needs_a_registry_that_exists_and_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No registry: refused, unless unenrolled workers are allowed; a named registry must exist and parse."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROBEGATE_WORKERS", raising=False)
    with pytest.raises(ConfigError, match="no worker registry"):
        enrolled_workers(None)
    assert enrolled_workers(None, allow_unenrolled=True) is None
    with pytest.raises(InputMissingError):
        enrolled_workers(tmp_path / "missing.json")
    (tmp_path / ".probegate").mkdir()
    (tmp_path / ".probegate" / "workers.json").write_text('{"workers": []}')
    found = enrolled_workers(None)  # the default file, found
    assert found is not None and found().workers == ()


def test_worker_acl_rules_are_narrow() -> None:
    """A worker's ACL user starts from nothing, writes under its own direct queue's name alone (its queue,
    unacked bookkeeping and results), names its database's channels, reads blobs only, and gets no admin
    command; its URL carries its own user and password in place of the admin's."""
    from urllib.parse import urlsplit

    from worker.celery.coordinator.acl import worker_rules
    from worker.celery.shared.app import direct_queue
    from worker.celery.shared.broker import with_user

    key_id = "ab" * 32
    own = direct_queue(key_id)
    rules = worker_rules(3, "pw", key_id)
    assert rules[:4] == ["reset", "on", ">pw", "resetchannels"]
    assert "&/3.celery.pidbox" in rules and "%R~probegate:blob:*" in rules and "+publish" not in rules
    # Its own results' channels and heartbeats, never the control channel nor another worker's results.
    assert rules[-1] == f"(+publish &{own}.results.celery-task-meta-* &/3.celeryev*)"
    assert not {"~*", "allkeys", "+@all", "allchannels", "+acl", "+config", "+keys", "+flushall"} & set(rules)
    assert not any(r.startswith("~probegate:") for r in rules)  # the books, and blobs for writing
    writable = [r[1:] for r in rules if r.startswith("~")]
    others = [k for k in writable if k != f"{own}*"]
    assert f"{own}*" in writable
    assert not any(k.startswith(("probegate.", "celery-task-meta", "unacked")) for k in others)
    # Bindings: its own queue's, and the mailboxes' to the control fanout (routed by PUBLISH, not the table).
    assert {k for k in writable if k.startswith("_kombu.binding.")} == {
        f"_kombu.binding.{own}",
        "_kombu.binding.celery.pidbox",
    }
    assert "(+lpush ~*.reply.celery.pidbox)" in rules  # replies pushed, the reply queue never read or deleted
    url = urlsplit(with_user("rediss://:admin@h:6380/0?ssl_cert_reqs=required", "probegate-worker-a", "p/w"))
    assert (url.username, url.password, url.port, url.query) == (
        "probegate-worker-a",
        "p%2Fw",
        6380,
        "ssl_cert_reqs=required",
    )


def test_gate_worker_key(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`gate-worker key` makes the key on first use (0600) and prints the same public key and id after."""
    import worker.celery.worker.signing as signing
    from worker.celery.worker.cli import main as worker_main

    monkeypatch.setattr(signing, "_key", None)
    configure(PoolSettings.from_env({signing.ENV_KEY: str(tmp_path / "w.key")}))  # put back after (tests/conftest.py)
    assert worker_main(["key", "--key", str(tmp_path / "w.key")]) == 0
    first = capsys.readouterr().out
    monkeypatch.setattr(signing, "_key", None)
    assert worker_main(["key", "--key", str(tmp_path / "w.key")]) == 0
    assert capsys.readouterr().out == first and "BEGIN PUBLIC KEY" in first and "key id: " in first
    assert (tmp_path / "w.key").stat().st_mode & 0o777 == 0o600
