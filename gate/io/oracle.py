"""Oracle edits: files the patch changed (per git, against a base revision) that belong to the
oracle — the probe entry, the fixture tree, the suite, the checks module, the freeze file and
any `oracle` globs the suite declares. A patch must not be able to grade itself.
"""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

from gate.core.errors import UsageError
from gate.core.suite import Suite


def changed_files(workdir: Path, base: str) -> list[Path]:
    """Absolute paths of files that differ from `base` anywhere in the repository, untracked ones included."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(workdir), *args], capture_output=True, text=True, check=True)
        except FileNotFoundError:
            raise UsageError("--base needs git on PATH") from None
        except subprocess.CalledProcessError as exc:
            raise UsageError(
                f"git {' '.join(args)} failed: {exc.stderr.strip().splitlines()[-1:]}",
                file=str(workdir),
                field="--base",
            ) from None
        return done.stdout

    top = Path(git("rev-parse", "--show-toplevel").strip())
    git("rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    names = git("diff", "--name-only", "--no-renames", base, "--", ":/").splitlines()
    names += git("ls-files", "--others", "--exclude-standard", "--full-name", "--", ":/").splitlines()
    return sorted({(top / n).resolve() for n in names if n})


def oracle_hits(
    changed: list[Path], *, files: list[Path], trees: list[Path], globs: list[str], root: Path
) -> list[str]:
    """The changed paths that are oracle files, shown relative to `root` where possible."""
    hits: list[str] = []
    for path in changed:
        rel = _relative(path, root)
        if (
            path in files
            or any(path.is_relative_to(t) for t in trees)
            or any(fnmatch.fnmatchcase(rel, g) for g in globs)
        ):
            hits.append(rel)
    return hits


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def oracle_edits(
    workdir: Path, base: str, *, suite: Suite, seal_file: Path, calibration: Path | None, fixtures: Path
) -> tuple[str, ...]:
    """The oracle files (suite, checks, seal, probe entry, freeze file, calibration, fixture tree and
    the suite's `oracle` globs) that differ between `base` and the work tree."""
    workdir = workdir.resolve()
    entry = next((a for a in suite.config.probe if a.endswith(".py")), None)
    files = [suite.path, suite.checks_path, seal_file.resolve()]
    files += [workdir / entry] if entry else []
    files += [suite.freeze_path] if suite.freeze_path else []
    files += [calibration.resolve()] if calibration else []
    changed = changed_files(workdir, base)
    return tuple(oracle_hits(changed, files=files, trees=[fixtures], globs=list(suite.config.oracle), root=suite.root))
