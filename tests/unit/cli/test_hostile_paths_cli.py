"""Issue 26, key files and paths: every case is one escaped line on stderr with a documented exit
code, no traceback, and nothing left behind (no key half, no registry, no lock file)."""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gate.cli.main import main
from gate.core.errors import RET_CONFIG, RET_INTERNAL, RET_NOINPUT, RET_USAGE, InputMissingError
from gate.io.keys import write_new_key

ED25519_OID = bytes.fromhex("06032b6570")  # 1.3.101.112
UNKNOWN_OID = bytes.fromhex("06032b657f")  # 1.3.101.127: no algorithm cryptography knows


def unknown_algorithm_pems(folder: Path) -> tuple[Path, Path]:
    """A private and a public PEM, well formed, whose algorithm OID is unknown."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    paths = []
    for name, der, label in (("odd.key", private, "PRIVATE KEY"), ("odd.pub", public, "PUBLIC KEY")):
        body = base64.encodebytes(der.replace(ED25519_OID, UNKNOWN_OID)).decode()
        path = folder / name
        path.write_text(f"-----BEGIN {label}-----\n{body}-----END {label}-----\n")
        path.chmod(0o600)
        paths.append(path)
    return paths[0], paths[1]


def gate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, err


def one_clean_line(err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1, err
    assert lines[0].startswith("gate: error: ") and lines[0].isprintable(), err
    for needle in needles:
        assert needle in lines[0], err


@pytest.fixture
def card_file(tmp_path: Path, card: object) -> Path:
    from gate.io.artifacts import write_card

    path = tmp_path / "card.json"
    write_card(path, card)  # type: ignore[arg-type]
    return path


def test_unknown_algorithm_oid_is_a_key_file_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], card_file: Path
) -> None:
    """`accept --key`, `refold --key`, `workers enrol`, `sign --key`: an unknown OID is exit 65 naming the file."""
    private, public = unknown_algorithm_pems(tmp_path)
    for argv in (
        ["refold", str(card_file), "--key", str(public)],
        ["workers", "enrol", str(public), "--name", "w1", "--workers", str(tmp_path / "reg" / "workers.json")],
        ["sign", str(card_file), "--key", str(private)],
    ):
        code, err = gate(capsys, *argv)
        assert code == RET_CONFIG, (argv, err)
        one_clean_line(err, str(public if "sign" not in argv else private), "UnsupportedAlgorithm")
    assert not (tmp_path / "reg").exists()  # a refused enrol leaves no registry, folder or lock


def test_accept_key_with_unknown_algorithm(tmp_path: Path) -> None:
    from gate.io.keys import KeyFileError, load_signing_key, load_verify_key

    private, public = unknown_algorithm_pems(tmp_path)
    with pytest.raises(KeyFileError, match="UnsupportedAlgorithm"):
        load_verify_key(public)  # what accept --key and run's forecast call
    with pytest.raises(KeyFileError, match="UnsupportedAlgorithm"):
        load_signing_key(private)  # what run --sign-key calls


def test_sign_with_a_public_key_names_its_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], card_file: Path
) -> None:
    """`gate sign --key KEY.pub` blames the file's kind (a public key), not its mode (0644)."""
    write_new_key(tmp_path / "k")
    code, err = gate(capsys, "sign", str(card_file), "--key", str(tmp_path / "k.pub"))
    assert code == RET_CONFIG
    one_clean_line(err, "a public key")
    assert "chmod" not in err


def _in_time(call: object, seconds: float = 10.0) -> object:
    """`call()` in a thread that must finish within `seconds` (a read of a FIFO would block forever)."""
    box: list[object] = []

    def target() -> None:
        try:
            box.append(call())  # type: ignore[operator]
        except Exception as exc:
            box.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked"
    if isinstance(box[0], Exception):
        raise box[0]
    return box[0]


def test_a_fifo_named_as_a_key_or_registry_never_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], card_file: Path
) -> None:
    """--key, --sign-key and --workers naming a FIFO are refused (exit 66) instead of blocking forever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    write_new_key(tmp_path / "w")
    for argv in (
        ["sign", str(card_file), "--key", str(fifo)],
        ["refold", str(card_file), "--key", str(fifo)],
        ["workers", "enrol", str(fifo), "--name", "w1", "--workers", str(tmp_path / "r.json")],
        ["workers", "list", "--workers", str(fifo)],
        ["workers", "enrol", str(tmp_path / "w.pub"), "--name", "w1", "--workers", str(fifo)],
    ):
        code = _in_time(lambda argv=argv: main(argv))
        err = capsys.readouterr().err
        assert code in (RET_NOINPUT, RET_USAGE), (argv, err)
        one_clean_line(err, "fifo")
    from gate.io.keys import load_signing_key, load_verify_key
    from gate.io.workers import load_roster

    for load in (load_signing_key, load_verify_key, load_roster):
        with pytest.raises(InputMissingError, match="not a regular file"):
            _in_time(lambda load=load: load(fifo))


def test_enrol_registry_paths_that_cannot_be_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`workers enrol --workers` under a regular file or with a 252-character name: exit 64, no lock left."""
    write_new_key(tmp_path / "w")
    (tmp_path / "file").write_text("x")
    before = set(os.listdir(tmp_path))
    for registry in (tmp_path / "file" / "workers.json", tmp_path / ("n" * 252)):
        code, err = gate(
            capsys, "workers", "enrol", str(tmp_path / "w.pub"), "--name", "w1", "--workers", str(registry)
        )
        assert code == RET_USAGE, err
        one_clean_line(err, "--workers")
    assert set(os.listdir(tmp_path)) == before


def test_refused_enrol_leaves_no_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = tmp_path / "workers.json"
    code, _ = gate(capsys, "workers", "enrol", str(tmp_path / "none.pub"), "--name", "w1", "--workers", str(registry))
    assert code == RET_NOINPUT
    code, _ = gate(capsys, "workers", "revoke", "w1", "--workers", str(registry))
    assert code == RET_NOINPUT
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["under_a_file", "proc", "long_name", "long_folder"])
def test_keys_new_where_no_key_can_go(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    """`gate keys new` under a file, under /proc, or with a name too long: exit 64, no half of a pair."""
    (tmp_path / "file").write_text("x")
    path = {
        "under_a_file": tmp_path / "file" / "k",
        "proc": Path("/proc/probegate-test/k"),
        "long_name": tmp_path / ("k" * 252),  # the key fits, its .pub does not
        "long_folder": tmp_path / ("d" * 300) / "k",
    }[where]
    before = set(os.listdir(tmp_path))
    code, err = gate(capsys, "keys", "new", str(path))
    assert code == RET_USAGE, err
    one_clean_line(err)
    assert set(os.listdir(tmp_path)) == before


def test_refold_with_a_long_card_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = gate(capsys, "refold", str(tmp_path / ("c" * 300)))
    assert code != RET_INTERNAL and code in (RET_NOINPUT, RET_USAGE, RET_CONFIG), err
    one_clean_line(err)


def test_refold_and_accept_key_with_a_card_name_no_envelope_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], card_file: Path
) -> None:
    """A card named 250 characters: its envelope name is too long; refold --key refuses it as unsigned."""
    long = tmp_path / ("c" * 250)
    long.write_bytes(card_file.read_bytes())
    write_new_key(tmp_path / "k")
    code = main(["refold", str(long), "--key", str(tmp_path / "k.pub")])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err and "File name too long" in out
    code, err = gate(capsys, "sign", str(long), "--key", str(tmp_path / "k"))
    assert code == RET_USAGE
    one_clean_line(err, "File name too long")


def test_key_id_hint_with_an_escape_sequence_is_escaped_in_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An envelope's keyid hint holding an escape sequence and a newline reaches stderr escaped, on
    the one REJECTED line (the JSON line on stdout escapes it as JSON does)."""
    import json

    from support.mini_suite import build_suite, good, run

    (tmp_path / "s").mkdir()
    suite = build_suite(tmp_path / "s")
    run(suite, good)
    write_new_key(tmp_path / "a")
    write_new_key(tmp_path / "b")
    assert main(["sign", str(suite.card), "--key", str(tmp_path / "a")]) == 0
    envelope = suite.card.with_name(suite.card.name + ".dsse.json")
    document = json.loads(envelope.read_text())
    document["signatures"][0]["keyid"] = "\x1b[2J\nFORGED"
    envelope.write_text(json.dumps(document))
    capsys.readouterr()
    root = suite.request.suite.parent
    code = main(
        ["accept", "--card", str(suite.card), "--seal", str(root / "fixtures.seal"), "--workdir", str(root / "work"),
         "--suite", str(root / "gate.toml"), "--allow-unchecked-oracle", "--key", str(tmp_path / "b.pub")]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gate accept: REJECTED: "), err
    assert lines[0].isprintable() and "\\x1b[2J\\nFORGED" in lines[0], lines[0]
    assert "\x1b" not in out


def test_run_sign_key_naming_a_fifo_is_refused_before_any_trial(tmp_path: Path) -> None:
    """`gate run --sign-key FIFO` is refused (66) instead of blocking; no trial runs, no card is written."""
    from dataclasses import replace

    from support.mini_suite import build_suite, good, run_request

    from gate.run.executors.mock import MockExecutor

    suite = build_suite(tmp_path)
    fifo = tmp_path / "key-fifo"
    os.mkfifo(fifo)
    executor = MockExecutor(good)
    request = replace(suite.request, sign_key=fifo)

    def go() -> object:
        return run_request(request, executor)

    with pytest.raises(InputMissingError, match="not a regular file"):
        _in_time(go)
    assert executor.calls == [] and not suite.card.exists()
