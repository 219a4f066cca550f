"""`[suite] seal` and `[suite] card`: `gate run` and `gate accept` use them when --seal/--card are not
given, flags still win, and the suite's card is left out of the patched tree's digest; over a
MockExecutor, no Docker."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.judging import in_process
from support.mini_suite import Suite, build_suite, good, run

from gate.cli.accept import run_accept
from gate.core.errors import RET_OK, SuiteError, UsageError
from gate.io.artifacts import read_card
from gate.io.fixtures import matches_any
from gate.io.snapshot import tree_digest
from gate.io.treeselect import tree_selection
from gate.run.executors.mock import MockExecutor
from gate.run.oracle import OracleRequest, read_oracle
from gate.run.runner import run_gate

CARD_IN_TREE = "work/.gate/card.json"  # relative to gate.toml's folder: inside the patched tree `work/`


def with_paths(tmp_path: Path, **keys: str) -> Suite:
    """The mini suite with `[suite]` keys added, run with neither --seal nor --card, books outside the tree."""
    suite = build_suite(tmp_path)
    toml = tmp_path / "gate.toml"
    lines = "".join(f'{key} = "{value}"\n' for key, value in keys.items())
    toml.write_text(toml.read_text().replace('checks = "checks.py"\n', f'checks = "checks.py"\n{lines}', 1))
    request = replace(suite.request, seal=None, card=None, ledger=tmp_path / "books.json")
    return replace(suite, request=request)


def test_run_uses_the_suites_seal_and_card(tmp_path: Path) -> None:
    """With no --seal/--card, `gate run` checks the seal and writes the card `[suite] seal` and `card` name."""
    suite = with_paths(tmp_path, seal="fixtures.seal", card="cards/card.json")
    result, _ = run(suite, good)
    assert result.card.exit_code == RET_OK
    assert read_card(tmp_path / "cards" / "card.json") == result.card


def test_the_flags_win_over_the_suite(tmp_path: Path) -> None:
    """--card and --seal given on the command line are used even when the suite names others."""
    suite = with_paths(tmp_path, seal="no-such.seal", card="cards/card.json")
    flagged = replace(suite, request=replace(suite.request, seal=tmp_path / "fixtures.seal", card=tmp_path / "c.json"))
    result, _ = run(flagged, good)
    assert read_card(tmp_path / "c.json") == result.card
    assert not (tmp_path / "cards").exists()


def test_neither_seal_nor_flag_is_one_usage_error(tmp_path: Path) -> None:
    """A suite without `seal` run without --seal is a usage error saying to pass --seal or set [suite] seal."""
    suite = with_paths(tmp_path, card="cards/card.json")
    with pytest.raises(UsageError, match=r"pass --seal or set \[suite\] seal"):
        run(suite, good)


def test_neither_card_nor_flag_is_one_usage_error(tmp_path: Path) -> None:
    """A suite without `card` run without --card is a usage error saying to pass --card or set [suite] card."""
    suite = with_paths(tmp_path, seal="fixtures.seal")
    with pytest.raises(UsageError, match=r"pass --card or set \[suite\] card"):
        run(suite, good)


def test_a_suite_card_inside_the_tree_needs_no_outputs_entry(tmp_path: Path) -> None:
    """A card `[suite] card` puts inside the patched tree is accepted without `outputs`, and writing it
    leaves the tree's digest (what accept recomputes) unchanged."""
    suite = with_paths(tmp_path, seal="fixtures.seal", card=CARD_IN_TREE)
    result, _ = run(suite, good)
    assert (tmp_path / CARD_IN_TREE).is_file()
    with read_oracle(OracleRequest(suite=tmp_path / "gate.toml", workdir=tmp_path / "work")) as oracle:
        selection = tree_selection(oracle.suite, tmp_path / "work", suite_file=tmp_path / "gate.toml")
        assert tree_digest(tmp_path / "work", selection) == result.card.tree_digest


def test_the_same_card_path_as_a_flag_outside_outputs_is_still_refused(tmp_path: Path) -> None:
    """Only the card the suite names is an output: --card naming another file in the tree is refused as before."""
    suite = with_paths(tmp_path, seal="fixtures.seal", card=CARD_IN_TREE)
    other = replace(suite, request=replace(suite.request, card=tmp_path / "work" / "other-card.json"))
    with pytest.raises(UsageError, match=r"name it in \[suite\] outputs"):
        run(other, good)


def test_the_card_glob_matches_the_card_and_nothing_else(tmp_path: Path) -> None:
    """A card named with glob characters is left out of the digest as itself only: a patch's `x.json`
    beside `[x].json` still counts."""
    suite = with_paths(tmp_path, seal="fixtures.seal", card="work/out/[x].json")
    with read_oracle(OracleRequest(suite=suite.request.suite, workdir=tmp_path / "work")) as oracle:
        extra = tree_selection(oracle.suite, tmp_path / "work", suite_file=suite.request.suite).outputs[-2]
    assert matches_any("out/[x].json", [extra])
    assert not matches_any("out/x.json", [extra])


@pytest.mark.parametrize("card", ["gate.toml", "fixtures.seal", "checks.py", "fixtures/card.json"])
def test_a_suite_card_over_an_oracle_file_is_refused(tmp_path: Path, card: str) -> None:
    """`[suite] card` naming the suite, the seal, the checks or a file in the fixture tree is a suite error
    before any trial (the run would overwrite an oracle file)."""
    suite = with_paths(tmp_path, seal="fixtures.seal", card=card)
    before = (tmp_path / "fixtures.seal").read_bytes()
    with pytest.raises(SuiteError, match="names an oracle file") as info:
        run(suite, good)
    assert info.value.field == "card"
    assert (tmp_path / "fixtures.seal").read_bytes() == before


def test_accept_reads_the_suites_card_and_seal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gate accept` with neither --card nor --seal reads the card and seal the suite names and accepts a clean run."""
    suite = with_paths(tmp_path, seal="fixtures.seal", card=CARD_IN_TREE)
    image = "sha256:" + "a" * 64  # accept refuses the mock's image ID
    answer = lambda spec, fixture: good(spec, fixture).model_copy(update={"image_id": image})  # noqa: E731
    real = MockExecutor(answer, image_id=image)
    run_gate(suite.request, executor_factory=lambda _: real, judge_factory=in_process, emit=lambda _: None)
    capsys.readouterr()
    code = run_accept(None, None, workdir=tmp_path / "work", suite=tmp_path / "gate.toml", allow_unchecked_oracle=True)
    assert code == RET_OK, capsys.readouterr()
    assert json.loads(capsys.readouterr().out)["accepted"] is True


def test_accept_without_any_card_is_one_usage_error(tmp_path: Path) -> None:
    """`gate accept` with no --card and a suite naming none is a usage error: pass --card or set [suite] card."""
    suite = with_paths(tmp_path, seal="fixtures.seal")
    with pytest.raises(UsageError, match=r"pass --card or set \[suite\] card"):
        run_accept(None, None, workdir=tmp_path / "work", suite=suite.request.suite)


# ---------------------------------------------------------------- paths that leave the suite's repository (issue 26)

OUTSIDE = [
    ("checks", "../../elsewhere/checks.py", "suite.checks"),
    ("checks", "/etc/passwd", "suite.checks"),
    ("fixtures", "../../fixtures", "suite.fixtures"),
    ("seal", "../../fixtures.seal", "suite.seal"),
    ("card", "/tmp/card.json", "suite.card"),
    ("freeze_file", "a/../../../freeze.json", "suite.freeze_file"),
    ("calibration", "../../c.json", "suite.calibration"),
    ("public_key", "/root/key.pub", "suite.public_key"),
]


def suite_in_repo(tmp_path: Path, **keys: str) -> Suite:
    """The mini suite one folder down in a git repository `repo/`."""
    import subprocess

    repo = tmp_path / "repo"
    (repo / "suite").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return with_paths(repo / "suite", **({"seal": "fixtures.seal", "card": "out/card.json"} | keys))


@pytest.mark.parametrize(("key", "value", "field"), OUTSIDE)
def test_a_path_out_of_the_repository_is_refused_at_load(tmp_path: Path, key: str, value: str, field: str) -> None:
    """A path gate.toml names that leaves the suite's repository: run, accept and baseline refuse at
    load (exit 65, naming the field), before anything is imported or read from it."""
    suite = suite_in_repo(tmp_path)
    toml = suite.request.suite
    lines = [line for line in toml.read_text().splitlines(keepends=True) if not line.startswith(f"{key} = ")]
    toml.write_text("".join(lines).replace("[suite]\n", f'[suite]\n{key} = "{value}"\n', 1))
    with pytest.raises(SuiteError, match="outside the suite's repository") as info:
        run(suite, good)
    assert info.value.exit_code == 65 and info.value.field == field and str(info.value).isprintable()
    with pytest.raises(SuiteError, match="outside the suite's repository"):
        run_accept(None, None, workdir=suite.request.workdir, suite=toml, allow_unchecked_oracle=True)
    assert not suite.card.exists()


def test_checks_outside_the_repository_are_never_imported(tmp_path: Path) -> None:
    """The issue's case: `checks` naming a module outside the repository is refused, not imported."""
    suite = suite_in_repo(tmp_path)
    planted = tmp_path / "planted.py"
    planted.write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    toml = suite.request.suite
    toml.write_text(toml.read_text().replace('checks = "checks.py"', 'checks = "../../planted.py"'))
    with pytest.raises(SuiteError, match=r"suite\.checks"):
        run(suite, good)
    assert not (tmp_path / "imported").exists()


def test_a_link_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    suite = suite_in_repo(tmp_path)
    (tmp_path / "elsewhere.py").write_text("")
    checks = suite.request.suite.parent / "checks.py"
    checks.unlink()
    checks.symlink_to(tmp_path / "elsewhere.py")
    with pytest.raises(SuiteError, match=r"suite\.checks"):
        run(suite, good)


def test_a_path_up_to_the_repository_is_kept(tmp_path: Path) -> None:
    """`..` that stays in the repository is fine: a suite in a subfolder may name the repository's files."""
    suite = suite_in_repo(tmp_path)
    shared = tmp_path / "repo" / "shared"
    shared.mkdir()
    (suite.request.suite.parent / "checks.py").rename(shared / "checks.py")
    toml = suite.request.suite
    toml.write_text(toml.read_text().replace('checks = "checks.py"', 'checks = "../shared/checks.py"'))
    result, _ = run(suite, good)
    assert result.card.exit_code == RET_OK


@pytest.mark.parametrize("line", ['oracle = ["../*.py"]', 'outputs = ["/etc/*"]'])
def test_globs_out_of_the_repository_are_refused(tmp_path: Path, line: str) -> None:
    suite = suite_in_repo(tmp_path)
    toml = suite.request.suite
    toml.write_text(toml.read_text().replace("[suite]\n", f"[suite]\n{line}\n", 1))
    with pytest.raises(SuiteError, match="outside the suite's repository"):
        run(suite, good)


def test_a_dockerfile_out_of_the_repository_is_refused_before_any_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`[suite.image] dockerfile = "../../../../etc/passwd"`: `gate image build` refuses at load (65)
    before sealing any build context; `gate run` likewise."""
    from gate.cli.main import main

    suite = suite_in_repo(tmp_path)
    toml = suite.request.suite
    text = toml.read_text().replace(
        "\n[[property]]", '\n[suite.image]\ndockerfile = "../../../../etc/passwd"\n\n[[property]]', 1
    )
    toml.write_text(text)
    assert main(["image", "build", "--suite", str(toml)]) == 65
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "suite.image.dockerfile" in err and "outside the suite's repository" in err
    with pytest.raises(SuiteError, match=r"suite\.image\.dockerfile"):
        run(suite, good)


def test_command_line_paths_are_unaffected(tmp_path: Path) -> None:
    """--seal outside the repository is the CI job's own file: used as before."""
    suite = suite_in_repo(tmp_path)
    kept = tmp_path / "ci-seal"
    (suite.request.suite.parent / "fixtures.seal").rename(kept)
    result, _ = run(replace(suite, request=replace(suite.request, seal=kept)), good)
    assert result.card.exit_code == RET_OK
