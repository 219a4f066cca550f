"""Every bad input gets one line on stderr naming the file and field, a documented exit code, no
traceback, and nothing is run. These tests call the command line's `main` in process (as the `gate`
console script does): each error stops the run before the executor that would start a container is
even made, which a tripwire in its place proves. The console script itself, and the refusals that
come after the sandbox opens, are tests/integration/cli/test_cli_inputs.py's.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import assert_one_line, run_args
from support.paths import INVOICE as EXAMPLE

from gate.cli.main import main
from gate.core.errors import RET_BLOCKED, RET_CONFIG, RET_NOINPUT, RET_USAGE

Gate = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A private copy of the invoice example that a test may break."""
    dest = tmp_path / "invoice"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.fixture(autouse=True)
def no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put tripwires where `gate run` and `gate baseline` get their executor and image: a command that
    reached either fails the test (pytest.fail is no Exception, so `main` cannot turn it into an exit code)."""

    def executor(image: str | None) -> None:
        pytest.fail(f"an executor was made (image {image!r}): the refusal came after the sandbox would start")

    def image(*args: object, **kwargs: object) -> None:
        pytest.fail("the project image was built: the refusal came after Docker was called")

    cli = importlib.import_module("gate.cli.runcommands")  # where the commands that run trials pick them
    monkeypatch.setattr(cli, "executor_factory", lambda placement: executor)
    monkeypatch.setattr(cli, "build_for_run", image)


@pytest.fixture
def gate(capsys: pytest.CaptureFixture[str]) -> Gate:
    """`gate ARGS...` in process: its exit code, stdout and stderr, as the console script would give them."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["gate", *args], code, out, err)

    return run


@pytest.fixture
def gate_before_sandbox(gate: Gate) -> Gate:
    """`gate ARGS...` that must stop before the sandbox: quickly, with nothing judged (no executor: the
    tripwire)."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        since = time.time()
        done = gate(*args)
        elapsed = time.time() - since
        assert elapsed < 10, f"took {elapsed:.1f} s: did trials run before the refusal?"
        assert done.stdout == "", done.stdout  # no verdict line: nothing was judged
        return done

    return run


def test_missing_suite_file_is_noinput(example: Path, gate: Gate) -> None:
    """A suite path that does not exist exits 66 and names the file."""
    (example / "gate.toml").unlink()
    assert_one_line(gate(*run_args(example)), RET_NOINPUT, "gate.toml", "suite file not found")


def test_invalid_toml_is_config_error(example: Path, gate: Gate) -> None:
    """A suite that is not TOML exits 65 and names the file."""
    (example / "gate.toml").write_text("[suite\nname=", encoding="utf-8")
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "gate.toml", "not valid TOML")


def test_property_without_band_is_refused(example: Path, gate: Gate) -> None:
    """An unclassified property never runs: exit 65 naming the file and the property."""
    text = (
        (example / "gate.toml")
        .read_text()
        .replace('band = "contract"\nfixture = "invoices/inv-002-tie.json"', 'fixture = "invoices/inv-002-tie.json"')
    )
    (example / "gate.toml").write_text(text)
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "gate.toml", "property invoice_total_half_even", "no band")


def test_unknown_band_is_refused(example: Path, gate: Gate) -> None:
    """A band outside safety/contract/statistical exits 65 naming the property and field."""
    text = (example / "gate.toml").read_text().replace('band = "safety"', 'band = "vibes"')
    (example / "gate.toml").write_text(text)
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "property no_unmapped_write", "band")


def test_missing_check_function_is_refused(example: Path, gate: Gate) -> None:
    """A check naming a function the checks module lacks exits 65 naming the property."""
    text = (example / "gate.toml").read_text().replace("checks:tool_choice", "checks:no_such_check")
    (example / "gate.toml").write_text(text)
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "property tool_choice_rate", "no_such_check")


def test_missing_seal_file_is_noinput(example: Path, gate: Gate) -> None:
    """A seal file that does not exist exits 66 and says how to make one."""
    (example / ".fixture-seal").unlink()
    assert_one_line(gate(*run_args(example)), RET_NOINPUT, ".fixture-seal", "gate seal")


def test_malformed_seal_file_is_config_error(example: Path, gate: Gate) -> None:
    """A seal file whose first line is not a digest exits 65."""
    (example / ".fixture-seal").write_text("not-a-digest\n")
    assert_one_line(gate(*run_args(example)), RET_CONFIG, ".fixture-seal", "64-hex-digit")


def test_missing_clock_is_config_error(example: Path, gate: Gate) -> None:
    """A fixture tree without clock.json exits 65 naming clock.json."""
    (example / "fixtures" / "clock.json").unlink()
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "clock.json")


def test_naive_clock_is_config_error(example: Path, gate: Gate) -> None:
    """A clock.json instant without an offset exits 65 naming the field."""
    (example / "fixtures" / "clock.json").write_text(json.dumps({"frozen_at": "2026-03-01T00:00:00"}))
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "clock.json", "frozen_at")


def test_freezing_a_safety_property_is_refused(example: Path, gate: Gate) -> None:
    """A freeze file that names a safety property exits 65: safety is never frozen."""
    seal = (example / ".fixture-seal").read_text().split()[0]
    entry = {
        "freeze_id": "f1",
        "properties": ["no_unmapped_write"],
        "seal": seal,
        "reason": "flaked",
        "expires_at": "2099-01-01T00:00:00Z",
        "retry_allowed": False,
    }
    (example / "flake-freeze.json").write_text(json.dumps({"freezes": [entry]}))
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "flake-freeze.json", "safety")


def test_freeze_with_retry_allowed_is_refused(example: Path, gate: Gate) -> None:
    """A freeze entry with retry_allowed true exits 65 naming the field."""
    seal = (example / ".fixture-seal").read_text().split()[0]
    entry = {
        "freeze_id": "f1",
        "properties": ["tool_choice_rate"],
        "seal": seal,
        "reason": "flaked",
        "expires_at": "2099-01-01T00:00:00Z",
        "retry_allowed": True,
    }
    (example / "flake-freeze.json").write_text(json.dumps({"freezes": [entry]}))
    assert_one_line(gate(*run_args(example)), RET_CONFIG, "flake-freeze.json", "retry_allowed")


def test_symlink_in_fixture_tree_is_refused(example: Path, gate: Gate) -> None:
    """`gate seal` refuses a symlink in the tree with exit 65 naming it."""
    (example / "fixtures" / "link.json").symlink_to(example / "fixtures" / "clock.json")
    assert_one_line(gate("seal", str(example / "fixtures")), RET_CONFIG, "link.json", "symlink")


def test_seal_of_missing_dir_is_noinput(tmp_path: Path, gate: Gate) -> None:
    """`gate seal` on a directory that does not exist exits 66."""
    assert_one_line(gate("seal", str(tmp_path / "nope")), RET_NOINPUT, "nope")


def test_negative_retries_is_usage_error(example: Path, gate: Gate) -> None:
    """--retries below zero exits 64."""
    assert_one_line(gate(*run_args(example, "--retries", "-1")), RET_USAGE, "--retries")


def test_missing_workdir_is_noinput(example: Path, gate: Gate) -> None:
    """A patched tree that does not exist exits 66 naming --workdir."""
    args = run_args(example)
    args[args.index("--workdir") + 1] = str(example / "patches" / "nope")
    assert_one_line(gate(*args), RET_NOINPUT, "--workdir")


def test_base_outside_git_is_usage_error(example: Path, gate: Gate) -> None:
    """--base on a tree that is not a git checkout exits 64 naming --base."""
    assert_one_line(gate(*run_args(example, "--base", "HEAD")), RET_USAGE, "--base")


def accept_args(example: Path) -> list[str]:
    return [
        *("--seal", str(example / ".fixture-seal"), "--suite", str(example / "gate.toml")),
        *("--workdir", str(example / "patches" / "good")),
    ]


def test_accept_missing_card_is_a_failed_gate(example: Path, gate: Gate) -> None:
    """accept with no card exits 1 and prints a rejected decision."""
    done = gate("accept", "--card", str(example / "none.json"), *accept_args(example))
    assert done.returncode == RET_BLOCKED
    assert json.loads(done.stdout)["accepted"] is False
    assert "Traceback" not in done.stderr


def test_accept_garbage_card_is_a_failed_gate(example: Path, gate: Gate) -> None:
    """accept with an unreadable card exits 1 naming the card file."""
    (example / "card.json").write_text('{"run_id": 3}')
    done = gate("accept", "--card", str(example / "card.json"), *accept_args(example))
    assert done.returncode == RET_BLOCKED
    assert "card.json" in json.loads(done.stdout)["reasons"][0]


def test_schema_card_prints_the_published_schema(gate: Gate) -> None:
    """`gate schema card` prints a JSON schema whose required fields include the accept inputs."""
    done = gate("schema", "card")
    assert done.returncode == 0
    schema = json.loads(done.stdout)
    assert schema["title"] == "VerdictCard"
    assert {"retry_count", "fixture", "properties", "new_oracle_edits", "image_id"} <= set(schema["properties"])


def card_args(ex: Path, card: Path, *extra: str) -> list[str]:
    args = run_args(ex, *extra)
    args[args.index("--card") + 1] = str(card)
    return args


@pytest.mark.parametrize("where", ["directory", "under_a_file", "read_only_fs"])
def test_unusable_card_is_refused_before_any_trial(example: Path, where: str, gate_before_sandbox: Gate) -> None:
    """A --card that is a directory or cannot be written exits 64 naming --card, before any container starts."""
    (example / "a-file").write_text("x")
    card = {
        "directory": example / "patches",
        "under_a_file": example / "a-file" / "card.json",
        "read_only_fs": Path("/proc/probegate-card.json"),  # no file can be created there, not even by root
    }[where]
    assert_one_line(gate_before_sandbox(*card_args(example, card)), RET_USAGE, "--card", str(card))
    assert not (example / "out").exists()


@pytest.mark.parametrize("where", ["directory", "under_a_file"])
def test_unusable_ledger_is_refused_before_any_trial(example: Path, where: str, gate_before_sandbox: Gate) -> None:
    """A --ledger that is a directory or cannot be written exits 64 naming --ledger, before any container starts."""
    (example / "a-file").write_text("x")
    ledger = example / "patches" if where == "directory" else example / "a-file" / "ledger.json"
    done = gate_before_sandbox(*run_args(example, "--ledger", str(ledger)))
    assert_one_line(done, RET_USAGE, "--ledger", str(ledger))
    assert not (example / "out").exists()


def test_default_ledger_that_is_a_directory_is_refused(example: Path, gate_before_sandbox: Gate) -> None:
    """When ledger.json beside the card is a directory, the run exits 64 naming --ledger before any trial."""
    (example / "out" / "ledger.json").mkdir(parents=True)
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_USAGE, "--ledger", "is a directory")
    assert not (example / "out" / "card.json").exists()


def test_card_over_the_seal_file_is_refused(example: Path, gate_before_sandbox: Gate) -> None:
    """A --card naming the seal file would overwrite it: exit 64 naming both flags."""
    args = card_args(example, example / ".fixture-seal")
    assert_one_line(gate_before_sandbox(*args), RET_USAGE, "--card", "--seal")


def replace_in_suite(ex: Path, old: str, new: str) -> None:
    text = (ex / "gate.toml").read_text()
    assert old in text
    (ex / "gate.toml").write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("probe", "needle"),
    [('""', "is empty"), ('"   "', "is empty"), ("[]", "is empty"), ('"python3 \'probe.py"', "No closing quotation")],
)
def test_probe_that_cannot_run_is_refused(example: Path, probe: str, needle: str, gate_before_sandbox: Gate) -> None:
    """An empty probe, one that splits to nothing, or one with an unbalanced quote exits 65 naming suite.probe."""
    replace_in_suite(example, 'probe = "python3 probe.py"', f"probe = {probe}")
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_CONFIG, "gate.toml", "probe", needle)


def test_probe_with_a_nul_byte_is_refused(example: Path, gate_before_sandbox: Gate) -> None:
    """A probe argument holding a NUL (no command line can carry one) exits 65 naming suite.probe."""
    replace_in_suite(example, 'probe = "python3 probe.py"', 'probe = "python3 probe\\u0000.py"')
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_CONFIG, "gate.toml", "probe", "NUL")


@pytest.mark.parametrize(
    ("line", "value", "field"),
    [
        ("deadline_s = 5.0", 'deadline_s = "5"', "deadline_s"),
        ("deadline_s = 5.0", "deadline_s = true", "deadline_s"),
        ("trials = 10", "trials = 10.0", "trials"),
        ("trials = 10", 'trials = "10"', "trials"),
        ('freeze_file = "flake-freeze.json"', 'freeze_file = "flake-freeze.json"\nledger = { budget = "2" }', "budget"),
        ('freeze_file = "flake-freeze.json"', 'freeze_file = "flake-freeze.json"\nlimits = { pids = "64" }', "pids"),
        ('freeze_file = "flake-freeze.json"', 'freeze_file = "flake-freeze.json"\nlimits = { cpus = inf }', "cpus"),
    ],
)
def test_number_given_as_string_is_refused(
    example: Path, line: str, value: str, field: str, gate_before_sandbox: Gate
) -> None:
    """A numeric field given as a string, a bool or the wrong kind of number exits 65 naming the field."""
    replace_in_suite(example, line, value)
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_CONFIG, "gate.toml", field)


@pytest.mark.parametrize(
    "clock",
    [
        {"frozen_at": "0999-12-31T23:59:59Z", "zone": "UTC"},
        {"frozen_at": "1000-01-01T00:00:00Z", "zone": "America/New_York"},  # 999 in the zone's wall time
        {"frozen_at": "9999-12-31T23:00:00Z", "zone": "Pacific/Kiritimati"},  # past year 9999 there
    ],
)
def test_clock_outside_the_sandbox_range_is_refused(
    example: Path, clock: dict[str, str], gate_before_sandbox: Gate
) -> None:
    """A frozen instant whose wall time in its zone falls outside years 1000..9999 exits 65 naming clock.json."""
    (example / "fixtures" / "clock.json").write_text(json.dumps(clock))
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_CONFIG, "clock.json", "1000..9999")


@pytest.mark.parametrize(
    "zone", ["localtime", "Factory", "/etc/localtime", "../zoneinfo/UTC", "CET-1CEST,M3.5.0,M10.5.0/3", "right/UTC"]
)
def test_zone_that_is_not_an_iana_key_is_refused(example: Path, zone: str, gate_before_sandbox: Gate) -> None:
    """A zone that is not an IANA key (the host's own, a path, a POSIX TZ rule) exits 65 naming the zone."""
    (example / "fixtures" / "clock.json").write_text(json.dumps({"frozen_at": "2026-03-01T00:00:00Z", "zone": zone}))
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_CONFIG, "clock.json", "zone", "IANA")


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.json", "invoices//inv-001.json", "a\x00b"])
def test_seal_manifest_path_outside_the_tree_is_refused(example: Path, path: str, gate_before_sandbox: Gate) -> None:
    """A seal-file manifest line naming a path outside the tree exits 65 naming the seal file and the line."""
    seal = example / ".fixture-seal"
    seal.write_text(seal.read_text() + f"{'0' * 64}  {path}\n")
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_CONFIG, ".fixture-seal", "line")


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        *[("--worker-wait", value) for value in ("0", "-1", "nan", "inf")],
        *[("--result-timeout", value) for value in ("nan", "-inf", "0")],
    ],
)
def test_bad_seconds_are_usage_errors(example: Path, flag: str, value: str, gate_before_sandbox: Gate) -> None:
    """A zero, negative, NaN or infinite --worker-wait / --result-timeout exits 64 naming the flag."""
    assert_one_line(gate_before_sandbox(*run_args(example, f"{flag}={value}")), RET_USAGE, flag)


@pytest.mark.parametrize("factor", ["nan", "inf"])
def test_non_finite_factor_is_a_usage_error(example: Path, factor: str, gate_before_sandbox: Gate) -> None:
    """`gate baseline --factor nan|inf` exits 64 naming --factor (NaN compared as not below 1 before)."""
    args = run_args(example)[1:]
    args = args[: args.index("--card")] + args[args.index("--card") + 2 :]
    done = gate_before_sandbox("baseline", *args, "--calibration", str(example / "cal.json"), f"--factor={factor}")
    assert_one_line(done, RET_USAGE, "--factor")


# ---------------------------------------------------------------- hostile bytes


def test_seal_of_a_file_name_that_is_not_utf8_is_refused(tmp_path: Path, gate: Gate) -> None:
    """`gate seal` and `gate reseal` on a tree holding a non-UTF-8 file name exit 65 naming it with the byte escaped."""
    tree = tmp_path / "tree"
    tree.mkdir()
    with open(os.path.join(os.fsencode(tree), b"inv-\xff\n.json"), "wb") as handle:
        handle.write(b"{}")
    assert_one_line(gate("seal", str(tree)), RET_CONFIG, "inv-\\xff\\n.json", "not UTF-8")
    done = gate("reseal", str(tree), "--seal", str(tmp_path / "seal"), "--write")
    assert_one_line(done, RET_CONFIG, "inv-\\xff\\n.json")
    assert not (tmp_path / "seal").exists()


def test_seal_write_to_a_directory_is_refused(example: Path, gate: Gate) -> None:
    """`gate seal DIR --write DIR2` exits 64 naming --write instead of failing after sealing."""
    assert_one_line(gate("seal", str(example / "fixtures"), "--write", str(example)), RET_USAGE, "--write")


@pytest.mark.parametrize(
    ("text", "needle"),
    [("a = " + "[" * 5000 + "]" * 5000, "nested too deeply"), ("a = " + "9" * 5000, "4300 digits")],
)
def test_hostile_suite_is_one_line(example: Path, text: str, needle: str, gate_before_sandbox: Gate) -> None:
    """A suite nested too deeply or holding a 5000-digit integer exits 65 naming the file."""
    (example / "gate.toml").write_text(text)
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_CONFIG, "gate.toml", needle)


def test_suite_that_is_a_directory_or_too_long_is_noinput(example: Path, gate: Gate) -> None:
    """A --suite that is a directory, or a path longer than the system allows, exits 66 naming it."""
    args = run_args(example)
    args[args.index("--suite") + 1] = str(example)
    assert_one_line(gate(*args), RET_NOINPUT, "is a directory")
    args[args.index("--suite") + 1] = str(example / ("x" * 300))
    assert_one_line(gate(*args), RET_NOINPUT, "too long")


@pytest.mark.parametrize(
    ("credit", "needle"),
    [
        ('{"property_id": "p", "remaining": 1, "expires_at": "2099-01-01T00:00:00", "last_detail": "d"}', "expires_at"),
        ('{"property_id": "p", "remaining": ' + "9" * 5000 + ', "expires_at": "x", "last_detail": "d"}', "4300 digits"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_hostile_ledger_is_one_line(example: Path, credit: str, needle: str, gate_before_sandbox: Gate) -> None:
    """A ledger with a naive expiry, a 5000-digit integer or deep nesting exits 65 naming the ledger file."""
    (example / "out").mkdir()
    (example / "out" / "ledger.json").write_text('{"credits": {"p": ' + credit + "}}")
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_CONFIG, "ledger.json", needle)


def test_control_characters_from_a_suite_are_escaped(example: Path, gate_before_sandbox: Gate) -> None:
    """Newlines, NUL and ESC in a property id come out escaped in the one error line naming the property."""
    replace_in_suite(example, 'id = "json_shape_v3"', 'id = "x\\n\\r\\u0000\\u001b[31mred"')
    done = gate_before_sandbox(*run_args(example))
    assert_one_line(done, RET_CONFIG, "gate.toml", "property x\\n\\r\\x00\\x1b[31mred")
    assert "\x1b" not in done.stderr


def test_control_characters_from_a_freeze_file_are_escaped(example: Path, gate: Gate) -> None:
    """Newlines, NUL and ESC that a freeze file carries into the error come out escaped, on one line."""
    seal = (example / ".fixture-seal").read_text().split()[0]
    entry = {
        "freeze_id": "f1",
        "properties": ["x\n\r\x00\x1b[31mred"],
        "seal": seal,
        "reason": "r",
        "expires_at": "2099-01-01T00:00:00Z",
    }
    (example / "flake-freeze.json").write_text(json.dumps({"freezes": [entry]}))
    done = gate(*run_args(example))  # read with the suite, before the sandbox (the tripwire)
    assert_one_line(done, RET_CONFIG, "flake-freeze.json", "x\\n\\r\\x00\\x1b[31mred")
    assert "\x1b" not in done.stderr


# ---------------------------------------------------------------- the books: never silently fresh


def test_new_ledger_over_an_existing_one_is_refused_before_any_trial(example: Path, gate_before_sandbox: Gate) -> None:
    """--new-ledger where the ledger file exists exits 64 naming it and --new-ledger, leaving it untouched."""
    (example / "out").mkdir()
    books = '{"credits": {}, "sampler_window": [true]}'
    (example / "out" / "ledger.json").write_text(books)
    done = gate_before_sandbox(*run_args(example, "--new-ledger"))
    assert_one_line(done, RET_USAGE, "ledger.json", "--new-ledger")
    assert (example / "out" / "ledger.json").read_text() == books


def test_ledger_credit_above_the_budget_is_refused_before_any_trial(example: Path, gate_before_sandbox: Gate) -> None:
    """A ledger credit with more remaining than [suite.ledger] budget exits 65 naming the file and the property."""
    (example / "out").mkdir()
    credit = {"property_id": "p", "remaining": 3, "expires_at": "2099-01-01T00:00:00Z", "last_detail": "d"}
    (example / "out" / "ledger.json").write_text(json.dumps({"credits": {"p": credit}}))
    done = gate_before_sandbox(*run_args(example))
    assert_one_line(done, RET_CONFIG, "ledger.json", "credits.p", "budget 2")


def test_ledger_url_of_another_scheme_is_a_usage_error(example: Path, gate_before_sandbox: Gate) -> None:
    """--ledger with a URL that is not redis:// or rediss:// exits 64 naming --ledger."""
    done = gate_before_sandbox(*run_args(example, "--ledger", "s3://bucket/ledger.json"))
    assert_one_line(done, RET_USAGE, "--ledger")


def test_an_unknown_interpreter_mode_in_the_environment_is_refused(
    example: Path, gate_before_sandbox: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$PROBEGATE_INTERPRETER other than fresh or warm exits 64 naming the variable, before the suite is read."""
    monkeypatch.setenv("PROBEGATE_INTERPRETER", "tepid")
    assert_one_line(gate_before_sandbox(*run_args(example)), RET_USAGE, "$PROBEGATE_INTERPRETER", "'tepid'")


def test_warm_interpreters_forced_on_a_probe_that_is_not_python_are_refused(
    example: Path, gate_before_sandbox: Gate
) -> None:
    """--interpreter warm on a suite whose probe is a shell command exits 64 naming the suite and the flag."""
    suite = example / "gate.toml"
    suite.write_text(suite.read_text().replace('probe = "python3 probe.py"', 'probe = "sh probe.sh"', 1))
    done = gate_before_sandbox(*run_args(example), "--interpreter", "warm")
    assert_one_line(done, RET_USAGE, "gate.toml", "--interpreter", "Python probes only")
