"""Every reader of a file the user (or the patch) wrote holds under hostile bytes: whatever the file
holds or wherever the path points, the only exception out of it is a GateError, and its text is one
printable line. Covers the suite, clock, freeze file, calibration, ledger, seal file, card, key files, the worker
registry, and the tree walk behind `gate seal` / `gate reseal`.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.scratch import memory_scratch

from gate.core.card.card import accept
from gate.core.errors import (
    RET_CONFIG,
    RET_NOINPUT,
    ConfigError,
    FixtureTreeError,
    GateError,
    InputMissingError,
    UsageError,
)
from gate.core.suite.suite import LedgerConfig, SamplerConfig, Suite
from gate.io.artifacts import check_writable, read_card
from gate.io.bookstore import encode_books, load_books
from gate.io.fixtures import read_clock, read_seal_file, seal_tree
from gate.io.inputs import read_input
from gate.io.keys import load_signing_key, load_verify_key
from gate.io.reseal import run_reseal
from gate.io.reviewed import read_calibration as load_calibration
from gate.io.reviewed import read_freeze_file
from gate.io.snapshot import tree_digest
from gate.io.suite import load_suite
from gate.io.workers import load_roster

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SEAL = "c" * 64
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- what a clean failure looks like


def assert_clean(error: GateError) -> None:
    text = str(error)
    assert text, error
    assert len(text.splitlines()) == 1, text
    assert all(c.isprintable() for c in text), text  # no NUL, ESC, CR, bidi mark or lone surrogate


def holds(call: Callable[[], object]) -> object | None:
    """Run a reader: success, or a GateError with a clean line. Anything else fails the test."""
    try:
        return call()
    except GateError as exc:
        assert_clean(exc)
        return None


_SCRATCH: list[Path] = []


@pytest.fixture(autouse=True, scope="module")
def scratch_root() -> Iterator[None]:
    """One folder for the module (in memory where there is one), emptied after each use: making and removing
    a folder per example (about 1 ms each on ext4) cost more than most readers did."""
    with memory_scratch("probegate-fuzz-") as root:
        _SCRATCH[:] = [root]
        yield


@contextmanager
def scratch() -> Iterator[Path]:
    """An empty folder, emptied again afterwards whatever the reader left in it (files, FIFOs, folders)."""
    root = _SCRATCH[0]
    try:
        yield root
    finally:
        for entry in os.scandir(root):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


# ---------------------------------------------------------------- hostile values, as raw text

DEPTHS = st.sampled_from([5, 400, 999, 1001, 3000, 20_000])
DIGITS = st.sampled_from([19, 20, 4299, 4300, 4301, 5000, 20_000])
DATES = st.sampled_from(
    [
        "2026-03-01T00:00:00",  # naive
        "2026-03-01T00:00:00Z",
        "2026-03-01",
        "0001-01-01T00:00:00+14:00",  # leaves datetime's range when converted
        "9999-12-31T23:59:59-14:00",
        "0999-12-31T23:59:59Z",  # below what faketimerc can print in 19 characters
        "1000-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "2026-02-30T00:00:00Z",
        "2026-03-01T00:00:00+99:00",
    ]
)
ZONES = st.sampled_from(
    ["UTC", "Europe/Berlin", "localtime", "Factory", "posixrules", "/etc/localtime", "../zoneinfo/UTC", "Europe",
     "right/UTC", "posix/UTC", "CET-1CEST,M3.5.0,M10.5.0/3", "EST5", "", "UTC\x00", "Europe//Berlin", "zone.tab",
     "Pacific/Kiritimati", "Etc/GMT-14", "leapseconds"]
)  # fmt: skip
TEXT = st.text(max_size=12)


def _json_fragment(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["nest", "nest_obj", "int", "neg_int", "float", "text", "date", "zone", "const"]))
    if kind == "nest":
        depth = draw(DEPTHS)
        return "[" * depth + "]" * depth
    if kind == "nest_obj":
        depth = draw(DEPTHS)
        return '{"a":' * depth + "1" + "}" * depth
    if kind in ("int", "neg_int"):
        return ("-" if kind == "neg_int" else "") + "9" * draw(DIGITS)
    if kind == "float":
        return draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0.0", "1e-400", "0.5"]))
    if kind == "text":
        return json.dumps(draw(TEXT))
    if kind == "date":
        return json.dumps(draw(DATES))
    if kind == "zone":
        return json.dumps(draw(ZONES))
    return draw(
        st.sampled_from(["null", "true", "false", "[]", "{}", '""', '"\\u0000"', '"a\\nb\\u001b[31m"', '"\\ud800"'])
    )


json_fragment = st.composite(_json_fragment)()


def _toml_fragment(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["nest", "nest_table", "int", "float", "text", "probe", "const"]))
    if kind == "nest":
        depth = draw(DEPTHS)
        return "[" * depth + "]" * depth
    if kind == "nest_table":
        depth = draw(DEPTHS)
        return "{ a = " * depth + "1" + " }" * depth
    if kind == "int":
        return "9" * draw(DIGITS)
    if kind == "float":
        return draw(st.sampled_from(["nan", "inf", "-inf", "1e999", "0.0", "-1.0", "2"]))
    if kind == "text":
        return json.dumps(draw(TEXT))  # JSON string escapes are TOML basic-string escapes (or a parse error)
    if kind == "probe":
        return draw(st.sampled_from(['""', '"   "', '"python3 \'probe.py"', "[]", '[""]', '["a\\u0000b"]']))
    return draw(st.sampled_from(['"2"', "true", '"\\u0000"', "1979-05-27T07:32:00", "1979-05-27", "[1, 2]", "{}"]))


toml_fragment = st.composite(_toml_fragment)()


def _mangle(draw: st.DrawFn, data: bytes) -> bytes:
    """Sometimes break the bytes: a NUL, an invalid UTF-8 byte, a cut."""
    how = draw(st.sampled_from(["keep", "keep", "nul", "bad_utf8", "cut"]))
    if how == "keep" or not data:
        return data
    at = draw(st.integers(0, len(data)))
    if how == "nul":
        return data[:at] + b"\x00" + data[at:]
    if how == "bad_utf8":
        return data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"])) + data[at:]
    return data[:at]


def fill(template: str, holes: list[str], fragment: st.SearchStrategy[str], draw: st.DrawFn) -> bytes:
    """The template with one or two of its holes replaced by hostile fragments, the rest left valid."""
    chosen = set(draw(st.lists(st.sampled_from(holes), min_size=1, max_size=2)))
    text = template
    for hole in holes:
        text = text.replace("{" + hole + "}", draw(fragment) if hole in chosen else VALID[hole], 1)
    return _mangle(draw, text.encode("utf-8", "surrogatepass"))


VALID = {
    # suite
    "probe": '"python3 probe.py"', "fixtures": '"fixtures"', "freeze": '"flake-freeze.json"', "pids": "64",
    "cpus": "1.0", "window": "20", "budget": "2", "ttl": "6.0", "id": '"p1"', "band": '"statistical"',
    "check": '"builtin:exits_zero"', "deadline": "2.0", "tis": "false", "trials": "10", "params": "{ k = 1 }",
    # JSON documents
    "frozen_at": '"2026-03-01T00:00:00Z"', "zone": '"UTC"', "freeze_id": '"f1"', "properties": '["rate"]',
    "seal": json.dumps(SEAL), "reason": '"flaked"', "expires_at": '"2099-01-01T00:00:00Z"', "retry": "false",
    "remaining": "1", "last_detail": '"d"', "window_bits": "[true, false]", "credit_key": '"rate"',
    "measured_at": '"2026-03-01T00:00:00Z"', "factor": "1.5", "p95": "0.2", "ctrials": "10", "cdeadline": "0.3",
    "created_at": '"2026-03-01T12:00:00Z"', "retry_count": "0", "manifest": '{"inv.json": "' + "d" * 64 + '"}',
    "rows": "[]", "exit_code": "0", "status": '"accepted"', "unenrolled": "false", "seeds_from": "null",
}  # fmt: skip

SUITE = """[suite]
probe = {probe}
fixtures = {fixtures}
freeze_file = {freeze}
limits = { pids = {pids}, cpus = {cpus} }
sampler = { window = {window} }
ledger = { budget = {budget}, ttl_hours = {ttl} }

[[property]]
id = {id}
band = {band}
fixture = "f.json"
check = {check}
deadline_s = {deadline}
timeout_is_safety = {tis}
trials = {trials}
params = {params}
"""
CLOCK = '{"frozen_at": {frozen_at}, "zone": {zone}}'
FREEZE = (
    '{"freezes": [{"freeze_id": {freeze_id}, "properties": {properties}, "seal": {seal}, "reason": {reason}, '
    '"expires_at": {expires_at}, "retry_allowed": {retry}}]}'
)
LEDGER = (
    '{"credits": {{credit_key}: {"property_id": "rate", "remaining": {remaining}, "expires_at": {expires_at}, '
    '"last_detail": {last_detail}}}, "sampler_window": {window_bits}}'
)
CALIBRATION = (
    '{"seal": {seal}, "measured_at": {measured_at}, "factor": {factor}, '
    '"properties": {"rate": {"p50_s": 0.1, "p95_s": {p95}, "trials": {ctrials}, "deadline_s": {cdeadline}}}}'
)
CARD = (
    '{"gate_version": "0.1.0", "run_id": "r", "created_at": {created_at}, "suite": "/s/gate.toml", '
    '"suite_sha256": "e", "workdir": "/w", "tree_digest": "t", '
    '"fixture": {"root": "/s/f", "seal": {seal}, "manifest": {manifest}}, "image": "i", "image_id": "sha256:1", '
    '"clock": {"frozen_at": {frozen_at}, "zone": {zone}}, "unenrolled_workers": {unenrolled}, '
    '"seeds_from": {seeds_from}, "retry_count": {retry_count}, "properties": {rows}, '
    '"status": {status}, "exit_code": {exit_code}}'
)

MINIMAL_SUITE = """[suite]
freeze_file = "flake-freeze.json"

[[property]]
id = "safe"
band = "safety"
fixture = "f.json"
check = "builtin:no_secret_in_output"

[[property]]
id = "rate"
band = "statistical"
fixture = "f.json"
check = "builtin:exits_zero"
"""


def suite_in(root: Path) -> Suite:
    (root / "gate.toml").write_text(MINIMAL_SUITE)
    return load_suite(root / "gate.toml")


# ---------------------------------------------------------------- each reader, on templates and on raw bytes


def read_suite(root: Path, data: bytes) -> object:
    (root / "gate.toml").write_bytes(data)
    suite = holds(lambda: load_suite(root / "gate.toml"))
    if suite is not None:  # what loaded must not blow up later either
        suite.checks_path, suite.freeze_path, suite.calibration_path  # noqa: B018 - resolving must not raise
        assert suite.config.probe and suite.config.probe[0] and all("\0" not in arg for arg in suite.config.probe)
        assert all(p.planned_trials() >= 1 for p in suite.properties)
    return suite


def read_clock_file(root: Path, data: bytes) -> object:
    (root / "clock.json").write_bytes(data)
    clock = holds(lambda: read_clock(root))
    if clock is not None:
        assert len(clock.faketimerc()) == 19  # what libfaketime's faketimerc needs
    return clock


def read_freezes(root: Path, data: bytes) -> object:
    suite = suite_in(root)
    (root / "flake-freeze.json").write_bytes(data)
    return holds(lambda: read_freeze_file(suite))


def read_calibration(root: Path, data: bytes) -> object:
    (root / "calibration.json").write_bytes(data)
    return holds(lambda: load_calibration(root / "calibration.json"))


def read_ledger(root: Path, data: bytes) -> object:
    (root / "ledger.json").write_bytes(data)
    books = holds(lambda: load_books(root / "ledger.json", LedgerConfig(), SamplerConfig()))
    if books is not None:  # a naive expiry that slipped through would fail here, comparing with NOW
        ledger, window = books
        ledger.draw("rate", "fault", NOW)[0].pruned(NOW)
        window.push([True])
        encode_books(ledger, window)  # what loaded can be written back after the trials (issue 26)
    return books


def read_seal(root: Path, data: bytes) -> object:
    (root / "seal").write_bytes(data)
    seal = holds(lambda: read_seal_file(root / "seal"))
    if seal is not None:
        for path in seal.manifest:
            parts = path.split("/")
            assert "\0" not in path and not path.startswith("/") and "" not in parts and ".." not in parts
    return seal


def read_card_file(root: Path, data: bytes) -> object:
    (root / "card.json").write_bytes(data)
    card = holds(lambda: read_card(root / "card.json"))
    if card is not None:
        accept(card, SEAL)
    return card


READERS: dict[str, tuple[Callable[[Path, bytes], object], str, st.SearchStrategy[str]]] = {
    "suite": (read_suite, SUITE, toml_fragment),
    "clock": (read_clock_file, CLOCK, json_fragment),
    "freezes": (read_freezes, FREEZE, json_fragment),
    "calibration": (read_calibration, CALIBRATION, json_fragment),
    "ledger": (read_ledger, LEDGER, json_fragment),
    "card": (read_card_file, CARD, json_fragment),
}


def holes_of(template: str) -> list[str]:
    return [hole for hole in VALID if "{" + hole + "}" in template]


@pytest.mark.parametrize("name", sorted(READERS))
def test_template_loads_when_untouched(name: str) -> None:
    """With every hole filled validly the template loads, so the fuzz below mutates real documents."""
    read, template, _ = READERS[name]
    text = template
    for hole in holes_of(template):
        text = text.replace("{" + hole + "}", VALID[hole])
    with scratch() as root:
        assert read(root, text.encode()) is not None


@pytest.mark.parametrize("name", sorted(READERS))
@FUZZ
@given(data=st.data())
def test_reader_refuses_hostile_fields_with_one_line(name: str, data: st.DataObject) -> None:
    """A valid document with hostile values in one or two fields loads or fails as one clean GateError."""
    read, template, fragment = READERS[name]
    document = fill(template, holes_of(template), fragment, data.draw)
    with scratch() as root:
        read(root, document)


def read_public_key(root: Path, data: bytes) -> object:
    (root / "key.pub").write_bytes(data)
    return holds(lambda: load_verify_key(root / "key.pub"))


def read_private_key(root: Path, data: bytes) -> object:
    (root / "key").write_bytes(data)
    (root / "key").chmod(0o600)
    return holds(lambda: load_signing_key(root / "key"))


def read_registry(root: Path, data: bytes) -> object:
    (root / "workers.json").write_bytes(data)
    return holds(lambda: load_roster(root / "workers.json"))


ALL_READERS = {
    **{name: entry[0] for name, entry in READERS.items()},
    "seal": read_seal,
    "public_key": read_public_key,
    "private_key": read_private_key,
    "registry": read_registry,
}


def _pem(label: str, der: bytes) -> bytes:
    return f"-----BEGIN {label}-----\n{base64.encodebytes(der).decode()}-----END {label}-----\n".encode()


_KEY = Ed25519PrivateKey.generate()
KEY_DER = {
    "PRIVATE KEY": _KEY.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()),
    "PUBLIC KEY": _KEY.public_key().public_bytes(serialization.Encoding.DER,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo),
}  # fmt: skip


@FUZZ
@given(label=st.sampled_from(sorted(KEY_DER)), at=st.integers(0, 60), byte=st.integers(0, 255), data=st.data())
def test_key_files_with_one_byte_changed_load_or_fail_in_one_line(
    label: str, at: int, byte: int, data: st.DataObject
) -> None:
    """A real key's DER with one byte changed (its algorithm OID, a length, the key) under either PEM
    label: both key readers load it or refuse it as one clean GateError (never UnsupportedAlgorithm)."""
    der = bytearray(KEY_DER[label])
    der[at % len(der)] = byte
    as_label = data.draw(st.sampled_from(sorted(KEY_DER)))
    with scratch() as root:
        read_public_key(root, _pem(as_label, bytes(der)))
        read_private_key(root, _pem(as_label, bytes(der)))


@pytest.mark.parametrize("name", sorted(ALL_READERS))
@FUZZ
@given(blob=st.binary(max_size=300))
def test_reader_refuses_arbitrary_bytes_with_one_line(name: str, blob: bytes) -> None:
    """Arbitrary bytes in the file load or fail as one clean GateError, never another exception."""
    with scratch() as root:
        ALL_READERS[name](root, blob)


HEX = st.text("0123456789abcdef", min_size=64, max_size=64)
MANIFEST_PATH = st.one_of(
    st.text(max_size=10),
    st.sampled_from(["/etc/passwd", "..", "../x", "a/../../b", "a//b", "a/", "./a", "a\\u0000b", "a\x00b", "\\n"]),
)


@FUZZ
@given(digest=HEX, lines=st.lists(st.tuples(st.booleans(), HEX, MANIFEST_PATH), max_size=4), data=st.data())
def test_seal_manifest_outside_the_tree_is_refused(
    digest: str, lines: list[tuple[bool, str, str]], data: st.DataObject
) -> None:
    """Manifest lines naming paths outside the tree (absolute, '..', empty part, NUL) are refused in one line."""
    body = "".join(("\\" if escaped else "") + f"{hexes}  {path}\n" for escaped, hexes, path in lines)
    with scratch() as root:
        read_seal(root, _mangle(data.draw, f"{digest}\n{body}".encode()))


@pytest.mark.parametrize("path", ["/etc/passwd", "a/../../b", "a//b", "x\x00y", "./a", "a/"])
def test_outside_path_names_the_line(path: str) -> None:
    """A manifest path outside the tree is a ConfigError naming the line and the path, escaped."""
    with scratch() as root:
        (root / "seal").write_text(f"{SEAL}\n{'d' * 64}  ok.json\n{'d' * 64}  {path}\n")
        with pytest.raises(ConfigError, match="line 3") as info:
            read_seal_file(root / "seal")
        assert_clean(info.value)


# ---------------------------------------------------------------- hostile trees (gate seal, gate reseal)

NAME = st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b".."))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(NAME, min_size=1, max_size=4, unique=True), content=st.binary(max_size=64))
def test_tree_with_hostile_names_seals_or_fails_in_one_line(names: list[bytes], content: bytes) -> None:
    """`gate seal`/`gate reseal` on files with any byte names seal, or refuse naming the file escaped."""
    with scratch() as tmp:
        tree = tmp / "tree"
        tree.mkdir()
        for name in names:
            with open(os.path.join(os.fsencode(tree), name), "wb") as handle:
                handle.write(content)
        undecodable = any(_not_utf8(name) for name in names)
        seal = holds(lambda: seal_tree(tree))
        assert (seal is None) == undecodable
        out = io.StringIO()
        code = holds(lambda: run_reseal(tree, tmp / "seal", write=True, out=out))
        assert (code is None) == undecodable
        if undecodable:
            with pytest.raises(FixtureTreeError, match=r"file name .*\\x[0-9a-f]{2}.* is not UTF-8"):
                seal_tree(tree)
        # The patched tree's digest (gate run, gate accept) takes the same names the same way.
        assert (holds(lambda: tree_digest(tree)) is None) == undecodable


def _not_utf8(name: bytes) -> bool:
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_fifo_in_tree_is_refused_without_blocking() -> None:
    """A FIFO in the tree is refused as not a regular file, never opened (which would block)."""
    with scratch() as tmp:
        os.mkfifo(tmp / "pipe")
        with pytest.raises(FixtureTreeError, match="pipe is not a regular file"):
            seal_tree(tmp)


def test_unreadable_folder_is_refused_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder the walk cannot list (simulated, as root lists everything) is refused with exit 66, not skipped."""
    real = os.scandir

    def scandir(path: object = ".") -> object:
        if isinstance(path, str) and path.endswith("locked"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)  # type: ignore[arg-type]

    with scratch() as tmp:
        (tmp / "locked").mkdir()
        (tmp / "locked" / "a").write_text("x")
        monkeypatch.setattr(os, "scandir", scandir)
        with pytest.raises(InputMissingError, match="cannot read locked: Permission denied") as info:
            seal_tree(tmp)
        assert info.value.exit_code == RET_NOINPUT


# ---------------------------------------------------------------- hostile paths


def _hostile_paths(root: Path) -> dict[str, Path]:
    (root / "a-dir").mkdir()
    (root / "a-dir" / "clock.json").mkdir()  # read_clock(a-dir): clock.json is a directory
    (root / "a-file").write_text("x")
    os.mkfifo(root / "a-fifo")
    return {
        "directory": root / "a-dir",
        "fifo": root / "a-fifo",
        "under_a_file": root / "a-file" / "x.json",
        "missing": root / "nope.json",
        "nul": root / "a\x00b",
        "long_name": root / ("n" * 300),
        "long_path": root / "/".join(["d" * 200] * 30),
        "newline": root / "line\nbreak\x1b[31m",
    }


PATH_READERS: dict[str, Callable[[Path, Path], object]] = {
    "suite": lambda root, path: load_suite(path),
    "clock": lambda root, path: read_clock(path),
    "freezes": lambda root, path: read_freeze_file(_freezing(suite_in(root), path)),
    "calibration": lambda root, path: load_calibration(path),
    "ledger": lambda root, path: load_books(path, LedgerConfig(), SamplerConfig()),
    "seal": lambda root, path: read_seal_file(path),
    "card": lambda root, path: read_card(path),
    "seal_tree": lambda root, path: seal_tree(path),
    "tree_digest": lambda root, path: tree_digest(path),
    "reseal": lambda root, path: run_reseal(path, root / "out-seal", write=False, out=io.StringIO()),
    "reseal_seal": lambda root, path: run_reseal(root / "a-dir", path, write=True, out=io.StringIO()),
    "public_key": lambda root, path: load_verify_key(path),
    "private_key": lambda root, path: load_signing_key(path),
    "registry": lambda root, path: load_roster(path),
}


def _freezing(suite: Suite, path: Path) -> Suite:
    """The suite with its freeze file at `path` (set past validation, which refuses a NUL)."""
    return suite.model_copy(update={"config": suite.config.model_copy(update={"freeze_file": str(path)})})


@pytest.mark.parametrize("reader", sorted(PATH_READERS))
def test_hostile_paths_fail_in_one_line(reader: str) -> None:
    """Directories, FIFOs, NULs, over-long names and non-directories in a path are one clean GateError each."""
    with scratch() as root:
        for label, path in _hostile_paths(root).items():
            if reader == "freezes" and label == "nul":
                continue  # Suite.resolve would raise on it; the suite's validation refuses a NUL first
            try:
                PATH_READERS[reader](root, path)
            except GateError as exc:
                assert_clean(exc)
                assert exc.exit_code in (RET_CONFIG, RET_NOINPUT, 64), (label, exc)
            except Exception as exc:  # pragma: no cover - the failure message is the point
                pytest.fail(f"{reader} on {label}: {type(exc).__name__}: {exc}")


def test_unreadable_file_is_noinput(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the gate may not read (PermissionError; tests run as root, so it is simulated) exits 66."""

    def denied(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("gate.io.artifacts.os.open", denied)
    with pytest.raises(InputMissingError, match=r"(?i)permission denied") as info:
        read_input(Path("/x/gate.toml"), "suite file")
    assert info.value.exit_code == RET_NOINPUT


@pytest.mark.parametrize("label", ["directory", "under_a_file", "nul", "long_name", "long_path", "fifo"])
def test_unusable_output_path_is_a_usage_error(label: str) -> None:
    """An output path the gate could not replace is refused before anything runs, naming the flag."""
    with scratch() as root:
        path = _hostile_paths(root)[label]
        with pytest.raises(UsageError) as info:
            check_writable(path, "--card")
        assert_clean(info.value)
        assert "--card" in str(info.value)


# ---------------------------------------------------------------- the error line itself


@settings(max_examples=200, deadline=None)
@given(message=st.text(), file=st.one_of(st.none(), st.text()), field=st.one_of(st.none(), st.text()))
def test_error_text_is_one_printable_line(message: str, file: str | None, field: str | None) -> None:
    """Whatever a GateError carries, its text is one line of printable characters."""
    text = str(ConfigError(message, file=file, field=field))
    assert len(text.splitlines()) <= 1
    assert all(c.isprintable() for c in text)


def test_undecodable_file_name_bytes_are_shown_as_hex() -> None:
    """A surrogate-escaped byte from os.walk is shown as the byte it stands for."""
    assert str(FixtureTreeError("bad", file=os.fsdecode(b"tree/\xff\x80"))) == "tree/\\xff\\x80: bad"
