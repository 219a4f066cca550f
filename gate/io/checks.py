"""Loading the suite's checks module: resolve every property's `module:function` to a callable,
the builtin ones from `gate.core.checks`, the rest from the checks file named by the suite.

The module is read once (`read_checks_module`); the coordinator loads it to refuse a bad reference
before anything runs, and the check process (`gate.io.checkproc`) loads the same bytes again to call
the checks, so both see exactly one version of the file.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.core.checks import BUILTINS, Check
from gate.core.errors import SuiteError
from gate.io.inputs import read_input


@dataclass(frozen=True)
class ChecksModule:
    """A suite's checks as read: the checks file's path, every property's `module:function`, and the
    file's bytes (None when every check is a builtin and nothing was read)."""

    path: Path
    names: Mapping[str, str]
    suite_file: str
    source: bytes | None

    def load(self) -> dict[str, Check]:
        """Resolve every property's `module:function` to a callable; errors name the property."""
        module = None
        resolved: dict[str, Check] = {}
        for prop_id, ref in self.names.items():
            mod_name, _, fn_name = ref.partition(":")
            where = f"property {prop_id}"
            if mod_name == "builtin":
                if fn_name not in BUILTINS:
                    raise SuiteError(
                        f"no builtin check {fn_name!r} (have {', '.join(BUILTINS)})", file=self.suite_file, field=where
                    )
                resolved[prop_id] = BUILTINS[fn_name]
                continue
            if mod_name != self.path.stem:
                raise SuiteError(
                    f"check {ref!r}: module must be {self.path.stem!r} or 'builtin'", file=self.suite_file, field=where
                )
            if module is None:
                module = _run_module(self.path, self.source)
            fn = getattr(module, fn_name, None)
            if not callable(fn):
                raise SuiteError(f"{self.path.name} has no function {fn_name!r}", file=self.suite_file, field=where)
            resolved[prop_id] = fn
        return resolved


def read_checks_module(checks_path: Path, names: Mapping[str, str], *, suite_file: str) -> ChecksModule:
    """The checks as named: the file is read only when some property names a function in it."""
    needed = any(ref.partition(":")[0] == checks_path.stem for ref in names.values())
    source = _read_file(checks_path) if needed else None
    return ChecksModule(path=checks_path, names=dict(names), suite_file=suite_file, source=source)


def _read_file(path: Path) -> bytes:
    try:
        found = path.is_file()
    except OSError:  # e.g. ENAMETOOLONG
        found = False
    if not found:
        raise SuiteError("checks module not found", file=str(path), field="suite.checks")
    # Read through the one reader that never blocks (a FIFO swapped in after is_file() is refused),
    # then run as the module's code: the import machinery would open the path itself.
    return read_input(path, "checks module")


def _run_module(path: Path, source: bytes | None) -> Any:
    # `read_checks_module` read the file for exactly the references that reach here.
    assert source is not None, "a function of the checks module is named, so the module was read"
    name = f"probegate_checks_{abs(hash(path))}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except (Exception, SystemExit) as exc:  # a module calling sys.exit() must not end the gate unexplained
        raise SuiteError(f"importing the checks module failed: {type(exc).__name__}: {exc}", file=str(path)) from None
    return module
