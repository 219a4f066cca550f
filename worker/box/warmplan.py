"""What a warm parent may pre-import and what a warm child's Python looks like, without any I/O but
listing folders: the probe's command line as a fresh `python3` reads it, the folders it puts first on
sys.path, the top-level names the tree shadows there, and the image's installed top-level names.

Stdlib-only and importing only what a bare interpreter has already loaded (os, sys): the warm parent
imports it before its pre-imports, so it must pull in nothing a tree could shadow.
"""

from __future__ import annotations

import os

# Standard modules most probes import, pre-imported where the image installs no distribution (and
# beside its distributions otherwise). Modules that start threads or open files at import stay out.
STDLIB = (
    "abc",
    "argparse",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "json",
    "math",
    "numbers",
    "operator",
    "pathlib",
    "random",
    "re",
    "statistics",
    "string",
    "struct",
    "textwrap",
    "typing",
    "unicodedata",
    "zoneinfo",
)
PYTHONS = ("python", "python3")
# A suffix that makes a file in a sys.path folder importable under its stem.
_MODULE_SUFFIXES = (".py", ".pyc", ".pyw", ".so")
_NOT_MODULES = ("__pycache__", "bin", "..", ".", "")
# Submodules never pre-imported: tests and build tools (slow, and nothing a probe runs), and shims
# that warn on import (the warning would then never reach the probe's stderr).
_NOT_PREIMPORTED = frozenset({"tests", "test", "testing", "conftest", "setup", "f2py", "distutils", "matlib"})


class Probe:
    """`python3 SCRIPT ARGS` or `python3 -m MODULE ARGS`, as a fresh interpreter would start it in `cwd`."""

    def __init__(self, argv: list[str], cwd: str) -> None:
        name = os.path.basename(argv[0])
        if not (name in PYTHONS or name.startswith("python3.")) or len(argv) < 2:
            raise ValueError(f"not a python3 SCRIPT or python3 -m MODULE probe: {argv[:3]}")
        self.module = argv[2] if argv[1] == "-m" and len(argv) > 2 else None
        if self.module is None and argv[1].startswith("-"):
            raise ValueError(f"not a python3 SCRIPT or python3 -m MODULE probe: {argv[:3]}")
        self.cwd = cwd
        self.script = None if self.module else os.path.join(cwd, argv[1])
        # sys.argv as the probe sees it (runpy replaces argv[0] by the module's path for -m).
        self.argv = [argv[1], *argv[2:]] if self.module is None else ["-m", *argv[3:]]

    def first_path(self) -> str:
        """sys.path[0]: the script's folder (its symlinks followed, as CPython does), or the cwd for -m."""
        if self.script is None:
            return self.cwd
        path = self.script
        for _ in range(40):
            if not os.path.islink(path):
                break
            path = os.path.join(os.path.dirname(path), os.readlink(path))
        return os.path.dirname(os.path.abspath(path))


def pythonpath(env: dict[str, str]) -> list[str]:
    """The PYTHONPATH folders a fresh interpreter puts after sys.path[0] (empty entries dropped)."""
    return [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]


def child_path(probe: Probe, env: dict[str, str], base: list[str]) -> list[str]:
    """The probe's sys.path: its first folder, then PYTHONPATH, then the image's own (the parent's)."""
    return [probe.first_path(), *pythonpath(env), *base]


def module_name(entry: str) -> str | None:
    """The top-level name a folder entry would be imported as (foo.py, foo/, foo.cpython-313-x86_64.so)."""
    for suffix in _MODULE_SUFFIXES:
        if entry.endswith(suffix):
            entry = entry[: -len(suffix)].split(".")[0]
            break
    else:
        if "." in entry:
            return None
    return entry if entry.isidentifier() else None


def shadowed(folders: list[str]) -> set[str]:
    """Every top-level name a module or folder in `folders` could be imported as: the tree's, which a
    fresh interpreter would find before the image's, so the parent must never pre-import it."""
    names: set[str] = set()
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        names.update(name for entry in entries if (name := module_name(entry)))
    return names


def installed(path: list[str]) -> list[str]:
    """The top-level names the image's installed distributions provide (their top_level.txt, else their
    RECORD), from every *.dist-info or *.egg-info under the folders of `path`; sorted, each once."""
    names: set[str] = set()
    for folder in path:
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.endswith((".dist-info", ".egg-info")):
                names.update(_top_level(os.path.join(folder, entry)))
    return sorted(names)


def _top_level(info: str) -> set[str]:
    for listing, from_record in (("top_level.txt", False), ("RECORD", True)):
        try:
            with open(os.path.join(info, listing), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        if from_record:
            lines = [line.split(",")[0].split("/")[0] for line in lines]
            lines = [line for line in lines if not line.endswith((".dist-info", ".data"))]
        return {name for line in lines if line not in _NOT_MODULES and (name := module_name(line.strip()))}
    return set()


def submodules(path: list[str], package: str) -> list[str]:
    """The public direct submodules of an installed package (dateutil.tz, dateutil.parser, ...): a
    probe imports those, not just the package. Tests, build tools and deprecated shims stay out."""
    for folder in path:
        where = os.path.join(folder, package)
        if os.path.isfile(os.path.join(where, "__init__.py")):
            try:
                entries = sorted(os.listdir(where))
            except OSError:
                return []
            names = (module_name(entry) for entry in entries)
            return [f"{package}.{name}" for name in dict.fromkeys(names) if name and _public(name)]
    return []


def _public(name: str) -> bool:
    return not name.startswith("_") and name not in _NOT_PREIMPORTED


def candidates(path: list[str], skip: set[str]) -> list[str]:
    """What the parent tries to pre-import: the image's distributions (each with its public direct
    submodules), then the common standard modules, never a name in `skip` (the tree's) nor a private one."""
    wanted = []
    for name in installed(path):
        if name not in skip and not name.startswith("_"):
            wanted += [name, *submodules(path, name)]
    wanted += [name for name in STDLIB if name not in skip]
    return list(dict.fromkeys(wanted))


def top(name: str) -> str:
    """A module's top-level name ("yaml" of "yaml.loader")."""
    return name.partition(".")[0]
