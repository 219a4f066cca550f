"""What `gate` loads before it has a command to run: parsing arguments, `--help` and a refused argument
must not pay for the run machinery, Docker, Celery, Redis or structlog (every `gate` process starts here)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT

from gate.cli.arguments import build_parser
from gate.cli.settings import ENV_REGISTRY
from gate.core.report.evidence_view import DEFAULT_LIMIT, DEFAULT_PASSES
from gate.io.reports import STEP_SUMMARY_ENV

RUN_MACHINERY = ("gate.run", "worker", "docker", "celery", "redis", "structlog")
MODELS = ("pydantic", "rich")  # the card and suite models, the terminal tables: loaded by the commands that use them

# Runs `main` on each argv in one fresh interpreter and prints, after each, the listed modules it had loaded.
PROBE = """
import contextlib, io, json, sys
prefixes = tuple(sys.argv[1].split(","))
def loaded():
    return sorted(m for m in sys.modules if m.startswith(prefixes))
from gate.cli.main import main
seen = {"import": loaded()}
for argv in json.loads(sys.argv[2]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    seen[" ".join(argv)] = [code, loaded()]
print(json.dumps(seen))
"""


def loaded_after(prefixes: tuple[str, ...], *argvs: list[str], cwd: Path) -> dict[str, object]:
    """The modules starting with `prefixes` a fresh interpreter has loaded after importing gate.cli.main,
    then after `main(argv)` for each argv in turn (with its exit code)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(prefixes), json.dumps(list(argvs))],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_parsing_help_and_a_refused_flag_load_neither_run_machinery_nor_models(tmp_path: Path) -> None:
    """Importing the command line, `--help`, `--version` and a flag argparse refuses load nothing of gate.run,
    worker, docker, celery, redis, structlog, pydantic or rich."""
    argvs = [["--help"], ["run", "--help"], ["--version"], ["run", "--frobnicate"], ["power", "--trials", "x"]]
    seen = loaded_after(RUN_MACHINERY + MODELS, *argvs, cwd=tmp_path)
    assert seen.pop("import") == []
    assert seen == {
        "--help": [0, []],
        "run --help": [0, []],
        "--version": [0, []],
        "run --frobnicate": [64, []],
        "power --trials x": [64, []],
    }


def test_a_run_refused_after_parsing_loads_no_run_machinery(tmp_path: Path) -> None:
    """`run`/`baseline` arguments refused by their own checks (not argparse) stop before gate.run, worker,
    docker, celery, redis and structlog load."""
    argvs = [
        ["run", "--retries", "-1"],
        ["run", "--workdir", str(tmp_path / "nope")],
        ["run", "--ledger", "s3://bucket/ledger.json"],
        ["run", "--card", str(tmp_path)],
        ["baseline", "--calibration", "cal.json", "--factor", "0.5"],
    ]
    seen = loaded_after(RUN_MACHINERY, *argvs, cwd=tmp_path)
    assert seen.pop("import") == []
    assert seen == {
        "run --retries -1": [64, []],
        f"run --workdir {tmp_path / 'nope'}": [66, []],
        "run --ledger s3://bucket/ledger.json": [64, []],
        f"run --card {tmp_path}": [64, []],
        "baseline --calibration cal.json --factor 0.5": [64, []],
    }


def help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The help `gate ARGV --help` prints, its whitespace folded (argparse wraps lines)."""
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_help_states_the_defaults_the_commands_use(capsys: pytest.CaptureFixture[str]) -> None:
    """The defaults the help writes out (to spare parsing the modules that own them) are those modules' own."""
    evidence = help_text(capsys, "evidence")
    assert f"per property (default {DEFAULT_PASSES})" in evidence
    assert f"per property (default {DEFAULT_LIMIT})" in evidence
    run = help_text(capsys, "run")
    assert f"append it to ${STEP_SUMMARY_ENV} when" in run
    assert f"(default ${ENV_REGISTRY}, else" in run
    assert f"(default ${ENV_REGISTRY}, else" in help_text(capsys, "workers", "list")


def test_evidence_flags_left_out_take_the_views_defaults() -> None:
    """`gate evidence` without --passes/--limit leaves them to the view (None), with them takes the numbers."""
    args = build_parser().parse_args(["evidence", "card.json"])
    assert (args.passes, args.limit) == (None, None)
    args = build_parser().parse_args(["evidence", "card.json", "--passes", "0", "--limit", "7"])
    assert (args.passes, args.limit) == (0, 7)


def test_only_the_run_machinery_logs_through_structlog() -> None:
    """structlog is imported by gate.run.runner, gate.run.baserun and gate.run.explain alone (besides
    gate.cli.logs), which only `run`, `baseline` and `flakes` reach: they point it at stderr (its default is stdout)."""
    root = ROOT
    users = sorted(
        str(path.relative_to(root))
        for folder in ("gate", "worker")
        for path in (root / folder).rglob("*.py")
        if "import structlog" in path.read_text(encoding="utf-8")
        or "from structlog" in path.read_text(encoding="utf-8")
    )
    assert users == ["gate/cli/logs.py", "gate/run/baserun.py", "gate/run/explain.py", "gate/run/runner.py"]


def test_every_subcommand_names_a_handler_that_exists() -> None:
    """Each subcommand's parser names its handler as `module:function`, and that function is there."""
    import importlib

    parser = build_parser()
    (choices,) = [action.choices for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    for name, sub in choices.items():
        handler = sub.get_default("handler")
        assert handler and ":" in handler, name
        module, _, function = handler.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), name
