"""`gate init [DIR]`: a suite to start gating an existing repository from, valid as written:
gate.toml (all three bands, both band rules), checks.py, probe.py, fixtures with their clock, the
seal, the books for this machine and a CI workflow. It never overwrites: one file in the way
refuses the whole command before anything is written.

The files are templates in gate/cli/scaffold/ (package data); only the suite's name is filled in.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.errors import RET_OK, InputMissingError, UsageError
from gate.io.inputs import reason

if TYPE_CHECKING:
    from gate.core.suite.suite import SuiteConfig

# (template in gate/cli/scaffold, where it goes under DIR, what it is). Templates have plain names:
# package-data globs skip dot files, and a `.py` there must not look like a module of the gate.
TEMPLATES: tuple[tuple[str, str, str], ...] = (
    ("gate.toml", "gate.toml", "the suite: properties, bands, band rules, paths (read it first)"),
    ("checks.py", "checks.py", "one check per property; they judge what the probe printed"),
    ("probe.py", "probe.py", "the probe: replace call_your_code() with a call into your code"),
    ("clock.json", "fixtures/clock.json", "the frozen instant every probe sees as wall time"),
    ("hello.json", "fixtures/requests/hello.json", "a fixture: one request for the probe"),
    ("accents.json", "fixtures/requests/accents.json", "a fixture"),
    ("probegate.yml", ".github/workflows/probegate.yml", "CI: gate run, then gate accept, on pull requests"),
    ("probegate.gitignore", ".probegate/.gitignore", "keeps the card and the books out of git"),
)
NAME_MARK = "__SUITE_NAME__"


def add_init_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `init` to the `gate` command's subparsers."""
    parser = subparsers.add_parser("init", help="write a suite to start from: gate.toml, checks, probe, fixtures, CI")
    parser.set_defaults(handler="gate.cli.init:init_command")
    parser.add_argument(
        "dir", nargs="?", type=Path, default=Path("."), metavar="DIR", help="the repository's root (default .)"
    )
    return parser


def init_command(args: argparse.Namespace) -> int:
    """`gate init [DIR]`."""
    return run_init(args.dir)


def run_init(root: Path) -> int:
    """Write the scaffold into `root`, print what was written and the next commands; exit 0."""
    from gate.io.bookstore import empty_books, encode_books
    from gate.io.fixtures import seal_tree, write_seal_file

    if not _is_dir(root):
        raise InputMissingError("not a folder; run gate init in an existing repository", file=str(root), field="DIR")
    files = render(root.resolve().name)
    config = suite_config(files["gate.toml"])
    assert config.seal and config.card, "the scaffold's gate.toml names its seal and card"
    # The books beside the card, where `gate run` looks by default: the first run needs no --new-ledger.
    ledger = (Path(config.card).parent / "ledger.json").as_posix()
    _refuse_clobbering(root, [*files, config.seal, ledger], fixtures=root / config.fixtures)
    for rel, data in files.items():
        _create(root / rel, data)
    # Sealed from the files as written, by the same code `gate run` verifies the seal with.
    write_seal_file(root / config.seal, seal_tree(root / config.fixtures))
    _create(root / ledger, encode_books(*empty_books(config.ledger, config.sampler)))
    written = [(dest, what) for _, dest, what in TEMPLATES]
    written += [(config.seal, "the seal of the fixture tree (gate reseal rewrites it)")]
    written += [(ledger, "the books for runs on this machine (CI keeps its own, see the workflow)")]
    _report(root, written)
    return RET_OK


def render(name: str) -> dict[str, bytes]:
    """The scaffold's files by their path under DIR, with the suite named after the folder."""
    from importlib import resources

    suite_name = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "suite"
    scaffold = resources.files("gate.cli") / "scaffold"
    files = {dest: (scaffold / template).read_bytes() for template, dest, _ in TEMPLATES}
    files["gate.toml"] = files["gate.toml"].replace(NAME_MARK.encode(), suite_name.encode())
    return files


def suite_config(gate_toml: bytes) -> SuiteConfig:
    """The `[suite]` table of the rendered gate.toml (the template is the one source of its paths)."""
    import tomllib

    from gate.core.suite.suite import SuiteConfig

    return SuiteConfig.model_validate(tomllib.loads(gate_toml.decode("utf-8"))["suite"])


def _refuse_clobbering(root: Path, paths: list[str], *, fixtures: Path) -> None:
    """Refuse before writing anything when a file is in the way, or the fixture folder holds files
    (the fixture tree is sealed whole: files of another purpose would be sealed into it)."""
    for rel in paths:
        target = root / rel
        if target.exists() or target.is_symlink():
            raise UsageError("exists; gate init never overwrites a file (move it away first)", file=str(target))
        for folder in Path(rel).parents[:-1]:  # e.g. a file named `.github` where a folder must go
            if (root / folder).is_symlink() or ((root / folder).exists() and not (root / folder).is_dir()):
                raise UsageError("is not a folder, and gate init writes files under it", file=str(root / folder))
    try:
        crowded = fixtures.is_dir() and any(fixtures.iterdir())
    except OSError as exc:
        raise UsageError(f"cannot read: {reason(exc)}", file=str(fixtures)) from None
    if crowded:
        raise UsageError("holds files already; gate init writes a fixture tree of its own here", file=str(fixtures))


def _create(path: Path, data: bytes) -> None:
    """Write a new file; "x" mode, so a file that appeared since the check is not overwritten either."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("xb") as handle:
            handle.write(data)
    except OSError as exc:
        raise UsageError(f"cannot write: {reason(exc)}", file=str(path)) from None


def _report(root: Path, written: list[tuple[str, str]]) -> None:
    print(f"gate init: wrote a suite to start from in {root.resolve()}:")
    width = max(len(rel) for rel, _ in written)
    for rel, what in written:
        print(f"  {rel:<{width}}  {what}")
    here = os.path.abspath(root) == os.getcwd()
    print("next: commit these files; commit a change to your code; then" + ("" if here else f" (in {root})") + ":")
    print("  gate run --base HEAD~1")
    print("  gate accept --base HEAD~1")
    note = _git_note(root)
    if note:
        print(f"gate init: note: {note}", file=sys.stderr)


def _git_note(root: Path) -> str | None:
    """Why the CI workflow or `--base` will not work from `root` as it is, if they will not."""
    import subprocess

    try:
        found = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
        )
    except OSError:
        return "git is not on PATH; `gate run --base` needs it"
    if found.returncode != 0:
        return f"{root} is not in a git repository; `gate run --base` needs one (git init)"
    top = Path(found.stdout.strip()).resolve()
    if top != root.resolve():
        return f"GitHub reads workflows only from {top}/.github/workflows; move probegate.yml there (run it in {root})"
    return None


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # e.g. ENAMETOOLONG, which pathlib does not swallow
        return False
