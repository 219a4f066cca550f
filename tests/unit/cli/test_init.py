"""`gate init`: the scaffold it writes is a valid, sealed suite whose probe and checks agree, and it
never overwrites anything; no Docker (the real run is tests/integration/cli/test_init.py)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.judging import load_checks

from gate.cli.arguments import build_parser
from gate.cli.init import TEMPLATES, run_init
from gate.cli.main import main
from gate.core.checks import Trial, judge
from gate.core.errors import RET_NOINPUT, RET_OK, RET_USAGE, UsageError
from gate.core.suite.trial import Captured, Observation
from gate.core.testing import make_spec
from gate.core.verdicts.verdict import OutcomeKind
from gate.io.fixtures import read_clock, read_seal_file, seal_tree
from gate.io.ledgerfile import FileBooks
from gate.io.suite import load_suite

SEAL, LEDGER = "fixtures.seal", ".probegate/ledger.json"
WRITTEN = [dest for _, dest, _ in TEMPLATES] + [SEAL, LEDGER]


def listing(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes (what a refused init must leave untouched)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def scaffold(tmp_path: Path) -> Path:
    """A folder `gate init` has written its scaffold into."""
    root = tmp_path / "my repo"
    root.mkdir()
    assert run_init(root) == RET_OK
    return root


def test_init_writes_every_file_it_lists(scaffold: Path) -> None:
    """gate init writes the suite, checks, probe, fixtures, seal, books, gitignore and CI workflow."""
    assert sorted(listing(scaffold)) == sorted(WRITTEN)


def test_the_written_suite_validates_with_all_bands_and_both_rules(scaffold: Path) -> None:
    """The generated gate.toml loads with load_suite: three bands, a fixed and an SPRT rule, its seal and card."""
    suite = load_suite(scaffold / "gate.toml")
    assert {p.band.value for p in suite.properties} == {"safety", "contract", "statistical"}
    assert {type(p.rule()).__name__ for p in suite.properties if p.rule()} == {"FixedRule", "SprtRule"}
    assert suite.seal_path == (scaffold / SEAL).resolve()
    assert suite.card_path == (scaffold / ".probegate" / "verdict-card.json").resolve()
    assert suite.config.name == "my-repo"  # from the folder's name, made a safe key
    assert load_checks(suite.checks_path, {p.id: p.check for p in suite.properties}, suite_file="gate.toml")


def test_the_written_seal_matches_the_written_fixtures(scaffold: Path) -> None:
    """The seal file gate init writes verifies against the fixture tree as written, clock included."""
    sealed = read_seal_file(scaffold / SEAL)
    assert sealed.digest == seal_tree(scaffold / "fixtures").digest
    assert "clock.json" in sealed.manifest
    assert read_clock(scaffold / "fixtures").zone == "UTC"


def test_the_written_books_are_empty_and_readable(scaffold: Path) -> None:
    """The books beside the card exist and are empty, so the first `gate run` needs no --new-ledger."""
    suite = load_suite(scaffold / "gate.toml")
    books = FileBooks(scaffold / LEDGER, suite.config.ledger, suite.config.sampler)
    books.check()
    empty = {"version": 2, "credits": {}, "sampler_window": [], "history": {}}
    assert json.loads((scaffold / LEDGER).read_text()) == empty


def test_the_gate_outputs_are_git_ignored_and_out_of_the_digest(scaffold: Path) -> None:
    """.probegate/ ignores everything in it for git, and the suite's outputs cover the card and the books."""
    assert (scaffold / ".probegate" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert load_suite(scaffold / "gate.toml").config.outputs == (".probegate/*",)


def test_the_probe_and_the_checks_agree_on_every_property(scaffold: Path) -> None:
    """The probe template, run on each property's fixture (plain python3, with a trial's seed as the gate
    gives it), prints what its check accepts."""
    suite = load_suite(scaffold / "gate.toml")
    checks = load_checks(suite.checks_path, {p.id: p.check for p in suite.properties}, suite_file="gate.toml")
    env = {**os.environ, "PROBEGATE_TRIAL_SEED": "1"}
    for prop in suite.properties:
        fixture = (scaffold / "fixtures" / prop.fixture).read_bytes()
        done = subprocess.run(
            [sys.executable, "probe.py"],
            input=fixture,
            capture_output=True,
            cwd=scaffold,
            timeout=30,
            check=True,
            env=env,
        )
        obs = Observation.of(
            make_spec(property_id=prop.id),
            exit_code=0,
            stdout=Captured(data=done.stdout, length=len(done.stdout)),
        )
        # No clock: this probe ran on the real clock, outside the sandbox.
        outcome = judge(checks[prop.id], Trial(obs, fixture, prop.params, None), prop.band)
        assert outcome.kind is OutcomeKind.HIT, (prop.id, outcome.detail)


def test_the_workflow_runs_the_gate_against_the_base_with_full_history(scaffold: Path) -> None:
    """The CI workflow fetches full history, then runs `gate run --base` and `gate accept --base` on pull requests."""
    text = (scaffold / ".github" / "workflows" / "probegate.yml").read_text()
    assert "pull_request:" in text and "fetch-depth: 0" in text
    assert text.index('run --base "$BASE"') < text.index('accept --base "$BASE"')
    assert "BASE: origin/${{ github.base_ref }}" in text


def test_the_workflow_writes_the_reports_and_uploads_card_evidence_and_reports(scaffold: Path) -> None:
    """The workflow's `gate run` line parses with the gate's own parser, names JUnit XML and the HTML report
    under .probegate/ (an output), and the upload step keeps the card, the evidence store and both reports."""
    text = (scaffold / ".github" / "workflows" / "probegate.yml").read_text()
    start = text.index("- name: gate run")
    step = text[start : text.index("- name:", start + 1)]
    lines = step.split("run: >-", 1)[1].splitlines()
    command = " ".join(line.strip() for line in lines if line.strip() and not line.strip().startswith("#"))
    argv = shlex.split(command.replace('"$GATE"', "gate", 1).replace("$", ""))[1:]
    args = build_parser().parse_args(argv)
    assert (args.junitxml, args.report_html) == (Path(".probegate/junit.xml"), Path(".probegate/report.html"))
    upload = text[text.index("uses: actions/upload-artifact") :]
    kept_paths = ("verdict-card.json", "evidence/", "junit.xml", "report.html")
    for kept in (f".probegate/{name}" for name in kept_paths):
        assert f"\n            {kept}\n" in upload, kept


def test_the_workflow_signs_the_card_between_run_and_accept_with_the_key_outside_the_checkout(scaffold: Path) -> None:
    """The optional `gate sign` step sits after the run and before accept, writes the secret to a 0600 file
    in $RUNNER_TEMP (never the checkout), removes it on exit, and the envelope is kept with the card."""
    text = (scaffold / ".github" / "workflows" / "probegate.yml").read_text()
    run, sign, accept = (text.index(f"- name: gate {name}") for name in ("run", "sign", "accept"))
    assert run < sign < accept
    step = text[sign:accept]
    assert "secrets.PROBEGATE_SIGN_KEY" in step and 'key="$RUNNER_TEMP/' in step
    assert "umask 077" in step and "trap 'rm -f \"$key\"' EXIT" in step
    line = next(ln.strip() for ln in step.splitlines() if ln.strip().startswith('"$GATE" sign'))
    args = build_parser().parse_args(shlex.split(line.replace('"$GATE"', "gate", 1).replace("$", ""))[1:])
    assert args.card == Path(".probegate/verdict-card.json")
    assert "\n            .probegate/verdict-card.json.dsse.json\n" in text


@pytest.mark.parametrize("taken", WRITTEN)
def test_init_refuses_when_any_file_it_writes_exists(tmp_path: Path, taken: str) -> None:
    """A file in the way of any scaffold file refuses init with a usage error naming it, writing nothing."""
    (tmp_path / taken).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / taken).write_bytes(b"mine\n")
    before = listing(tmp_path)
    with pytest.raises(UsageError, match="never overwrites") as info:
        run_init(tmp_path)
    assert info.value.file == str(tmp_path / taken)
    assert listing(tmp_path) == before


def test_init_refuses_a_dangling_symlink_in_the_way(tmp_path: Path) -> None:
    """A dangling symlink named like a scaffold file refuses init; its target is never created."""
    target = tmp_path / "elsewhere" / "target.py"
    os.symlink(target, tmp_path / "probe.py")
    with pytest.raises(UsageError, match="never overwrites"):
        run_init(tmp_path)
    assert not target.exists() and not (tmp_path / "gate.toml").exists()


@pytest.mark.parametrize("blocker", [".github", ".github/workflows", "fixtures", ".probegate"])
def test_init_refuses_a_file_where_it_needs_a_folder(tmp_path: Path, blocker: str) -> None:
    """A file (or a symlink) where a scaffold folder must go refuses init before any file is written."""
    (tmp_path / blocker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / blocker).write_text("mine\n")
    before = listing(tmp_path)
    with pytest.raises(UsageError, match="is not a folder") as info:
        run_init(tmp_path)
    assert info.value.file == str(tmp_path / blocker)
    assert listing(tmp_path) == before


def test_init_refuses_a_symlinked_folder_in_the_way(tmp_path: Path) -> None:
    """A symlink named `fixtures` (pointing elsewhere) refuses init; nothing is written through it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "repo"
    root.mkdir()
    os.symlink(elsewhere, root / "fixtures")
    with pytest.raises(UsageError, match="is not a folder"):
        run_init(root)
    assert list(elsewhere.iterdir()) == [] and not (root / "gate.toml").exists()


def test_init_refuses_a_fixture_folder_that_holds_other_files(tmp_path: Path) -> None:
    """An existing fixtures/ with files of its own is refused: they would be sealed into the suite's tree."""
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "conftest_data.json").write_text("{}")
    with pytest.raises(UsageError, match="holds files already"):
        run_init(tmp_path)
    assert sorted(listing(tmp_path)) == ["fixtures/conftest_data.json"]


def test_init_from_the_command_line_prints_the_files_and_the_next_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gate init` exits 0 and prints every file it wrote, then the next two commands (run and accept --base HEAD~1)."""
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == RET_OK
    out = capsys.readouterr().out
    assert all(rel in out for rel in WRITTEN)
    assert out.splitlines()[-2:] == ["  gate run --base HEAD~1", "  gate accept --base HEAD~1"]


def test_init_again_is_one_line_and_a_usage_exit(scaffold: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A second `gate init` in the same folder exits 64 with one line on stderr naming gate.toml."""
    capsys.readouterr()
    assert main(["init", str(scaffold)]) == RET_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    refusal = "exists; gate init never overwrites a file (move it away first)"
    assert err == [f"gate: error: {scaffold / 'gate.toml'}: {refusal}"]


def test_init_of_a_missing_folder_is_noinput(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gate init DIR` for a DIR that does not exist exits 66 with one line naming it."""
    assert main(["init", str(tmp_path / "nope")]) == RET_NOINPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "nope") in err[0] and "DIR" in err[0]


def test_schema_suite_describes_the_suite_table_and_the_properties(capsys: pytest.CaptureFixture[str]) -> None:
    """`gate schema suite` prints a JSON schema with [suite] and [[property]], the band rule under its TOML key."""
    assert main(["schema", "suite"]) == RET_OK
    schema = json.loads(capsys.readouterr().out)
    assert set(schema["properties"]) == {"suite", "property"}
    prop = schema["$defs"]["PropertySpec"]["properties"]
    assert {"rule", "p0", "p1", "alpha", "beta", "max_trials", "wave", "trials", "min_hits"} <= set(prop)


def test_the_workflow_runs_the_nightly_pair_on_a_schedule(scaffold: Path) -> None:
    """The workflow's scheduled job runs `gate baseline --twice` on the ledger, a line the gate's own parser takes."""
    text = (scaffold / ".github" / "workflows" / "probegate.yml").read_text()
    assert "schedule:" in text and "if: github.event_name == 'pull_request'" in text
    step = text[text.index("- name: gate baseline --twice") : text.index("- name: Keep the nightly")]
    lines = step.split("run: >-", 1)[1].splitlines()
    command = " ".join(line.strip() for line in lines if line.strip() and not line.strip().startswith("#"))
    argv = shlex.split(command.replace('"$GATE"', "gate", 1).replace("$", ""))[1:]
    args = build_parser().parse_args(argv)
    assert args.twice and args.ledger == "PROBEGATE_LEDGER" and args.base == "HEAD"


def test_the_workflow_runs_the_gate_on_pushes_to_the_default_branch(scaffold: Path) -> None:
    """A push to the default branch (only) runs `gate run --base HEAD` on the ledger, a line the gate's own
    parser takes: the base's own tree, whose frozen properties join the flake history."""
    text = (scaffold / ".github" / "workflows" / "probegate.yml").read_text()
    assert "\n  push:\n" in text
    job = text[text.index("\n  default-branch:") :]
    assert "if: github.event_name == 'push' && github.ref_name == github.event.repository.default_branch" in job
    step = job[job.index("- name: gate run on the default branch") : job.index("- name: Keep the card")]
    command = " ".join(line.strip() for line in step.split("run: >-", 1)[1].splitlines() if line.strip())
    argv = shlex.split(command.replace('"$GATE"', "gate", 1).replace("$", ""))[1:]
    args = build_parser().parse_args(argv)
    assert (args.command, args.base, args.ledger) == ("run", "HEAD", "PROBEGATE_LEDGER")
