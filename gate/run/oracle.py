"""Reading the oracle for a run: the suite, checks, fixture tree and its seal, clock, freeze file,
calibration and probe entry — from the base revision's git objects with `--base`, else from the
files named on the command line — plus the oracle edits the patch made. Everything here is read
before any container starts; nothing of the patched tree is imported.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gate.core.card.calibration import Calibration
from gate.core.errors import SuiteError, UsageError
from gate.core.policy.freezes import FreezeFile
from gate.core.suite.seal import Seal
from gate.core.suite.suite import ImageSource, Suite
from gate.core.suite.trial import ClockSpec
from gate.io.checks import ChecksModule, read_checks_module
from gate.io.fixtures import read_clock, read_seal_file
from gate.io.gitbase import BaseCheckout, oracle_edits
from gate.io.inputs import read_input
from gate.io.reviewed import read_calibration, read_freeze_file
from gate.io.suite import load_suite


@dataclass(frozen=True)
class OracleRequest:
    """Where the oracle is named: the command line's paths (in the work tree) and the base revision.
    `seal` None: the seal file the suite names (`[suite] seal`), read from the base with `base`."""

    suite: Path
    workdir: Path
    seal: Path | None = None
    fixture: Path | None = None
    calibration: Path | None = None
    base: str | None = None
    calibrated_deadlines: bool = True
    interpreter: Literal["fresh", "warm"] | None = None  # overrides the suite's (--interpreter)


@dataclass(frozen=True)
class Oracle:
    suite: Suite
    fixture_root: Path
    seal_file: Path
    expected: Seal
    # The checks module as read, for the run's check process (`gate.io.checkproc`) to load: checks are
    # never called in the coordinator, which loads the module once only to refuse a bad reference early.
    checks_module: ChecksModule
    clock: ClockSpec
    freeze_file: FreezeFile | None
    calibration: Calibration | None
    edits: tuple[str, ...] = ()
    base_commit: str | None = None  # the commit the oracle was read from (None: the work tree's files)
    # Files laid over the patched tree's snapshot: the base's probe entry, so the patch cannot swap it.
    overrides: dict[str, bytes] = field(default_factory=dict)
    image: ImageSource | None = None  # the project image's definition, as read (from the base)
    # The card `[suite] card` names, in the work tree (None: the suite names none).
    card: Path | None = None
    # The base revision's version of the work folder, extracted (None: no --base); lives until the
    # oracle's context ends. Flakes are established by rerunning trials there (`gate.run.baserun`).
    base_workdir: Path | None = None


def probe_entry(suite: Suite) -> str | None:
    """The probe's Python entry (the first `*.py` argument), relative to the tree's root."""
    return next((arg for arg in suite.config.probe if arg.endswith(".py")), None)


@contextlib.contextmanager
def read_oracle(request: OracleRequest) -> Iterator[Oracle]:
    """The oracle for a run; with `base`, read from that revision (kept until the context ends)."""
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(BaseCheckout(request.workdir, request.base)) if request.base else None

        def where(path: Path, what: str) -> Path:
            # A file outside the repository (a seal or calibration the CI job keeps) is out of the
            # patch's reach; one inside is read from the base, whatever the work tree holds.
            return base.need(path, what) if base and base.inside(path) else path

        suite = load_suite(where(request.suite, "the suite file"), repository=base.root if base else None)
        suite = _interpreter(suite, request)
        named = where(request.fixture, "the fixture tree") if request.fixture else None
        fixture_root = (named or suite.resolve(suite.config.fixtures)).resolve()
        seal_named = request.seal or _suite_seal(suite, base, shown=request.suite)
        seal_file = where(seal_named, "the seal file")
        card = _suite_card(suite, base, shown=request.suite, inputs=(request.suite, seal_named, fixture_root))
        calibration_path = request.calibration or suite.calibration_path
        if request.calibration and base:
            calibration_path = where(request.calibration, "the calibration")
        definition = suite.image_definition
        image = suite.image_source(where(definition, "the image definition")) if definition else None
        names = {p.id: p.check for p in suite.properties}
        checks_module = read_checks_module(suite.checks_path, names, suite_file=str(suite.path))
        checks_module.load()  # a missing function or a module that fails to import: refused now
        entry = probe_entry(suite)
        yield Oracle(
            suite=suite,
            fixture_root=fixture_root,
            seal_file=seal_file,
            expected=read_seal_file(seal_file),
            checks_module=checks_module,
            clock=read_clock(fixture_root),
            freeze_file=read_freeze_file(suite),
            calibration=read_calibration(calibration_path if request.calibrated_deadlines else None),
            edits=_edits(base, suite, request, seal_named, fixture_root, calibration_path, entry) if base else (),
            base_commit=base.commit if base else None,
            overrides={entry: read_input(base.need(request.workdir / entry, "the probe entry"), "probe entry")}
            if base and entry
            else {},
            image=image,
            card=card,
            base_workdir=base.at(request.workdir) if base else None,
        )


def _interpreter(suite: Suite, request: OracleRequest) -> Suite:
    """The suite with --interpreter (or $PROBEGATE_INTERPRETER) over its own `interpreter`."""
    try:
        return suite.with_interpreter(request.interpreter)
    except ValueError as exc:
        raise UsageError(f'"warm" {exc}', file=str(request.suite), field="--interpreter") from None


def _named(suite: Suite, relative: str, base: BaseCheckout | None) -> Path:
    """Where a path the suite names (relative to gate.toml's folder) lies in the work tree. Joined
    lexically: with `base` the suite was read from the base's copy, and the path is mapped back."""
    root = base.worktree(suite.root) if base else suite.root
    return Path(os.path.normpath(root / relative))


def _suite_seal(suite: Suite, base: BaseCheckout | None, *, shown: Path) -> Path:
    """The seal file `[suite] seal` names, in the work tree; neither it nor --seal is a usage error."""
    if suite.config.seal is None:
        raise UsageError("no seal file: pass --seal or set [suite] seal", file=str(shown), field="--seal")
    return _named(suite, suite.config.seal, base)


def _suite_card(suite: Suite, base: BaseCheckout | None, *, shown: Path, inputs: tuple[Path, ...]) -> Path | None:
    """The card `[suite] card` names, in the work tree. It is written over after every run, so it may
    not name the suite, the seal file, the checks module or a file in the fixture tree."""
    if suite.config.card is None:
        return None
    card = _named(suite, suite.config.card, base)
    suite_file, seal, fixture_root = inputs
    work_fixtures = base.worktree(fixture_root) if base and fixture_root.is_relative_to(base.root) else fixture_root
    oracle = {os.path.abspath(p) for p in (suite_file, seal, _named(suite, suite.config.checks, base))}
    if os.path.abspath(card) in oracle or card.is_relative_to(os.path.abspath(work_fixtures)):
        raise SuiteError("names an oracle file, which each run would overwrite", file=str(shown), field="card")
    return card


def _edits(
    base: BaseCheckout,
    suite: Suite,
    request: OracleRequest,
    seal: Path,
    fixture_root: Path,
    calibration: Path | None,
    entry: str | None,
) -> tuple[str, ...]:
    """The oracle files whose contents differ between the base and the work tree."""
    files = [base.worktree(suite.path), base.worktree(suite.checks_path), seal]
    files += [request.workdir / entry] if entry else []
    files += [base.worktree(suite.freeze_path)] if suite.freeze_path else []
    # The public key accept trusts: a patch that swaps it could sign its own cards.
    key = suite.public_key_path
    files += [base.worktree(key)] if key and key.is_relative_to(base.root) else []
    trees = [base.worktree(fixture_root)] if fixture_root.is_relative_to(base.root) else []
    if suite.config.image and suite.image_definition:
        # The image definition is oracle: a patch that edits it is refused, never built. A Dockerfile's
        # whole folder is its build context, so every file there is oracle too.
        definition = base.worktree(suite.image_definition)
        files.append(definition)
        trees += [definition.parent] if suite.config.image.dockerfile else []
    if calibration is not None:
        files.append(base.worktree(calibration) if calibration.is_relative_to(base.root) else calibration)
    files = [path for path in files if base.inside(path)]
    return oracle_edits(
        base,
        files=files,
        trees=trees,
        globs=suite.config.oracle,
        root=base.worktree(suite.root),
    )
