"""Loading the suite's checks module: resolve every property's `module:function` to a callable,
the builtin ones from `gate.core.checks`, the rest from the checks file named by the suite.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gate.core.checks import BUILTINS, Check
from gate.core.errors import SuiteError
from gate.io.inputs import read_input


def load_checks(checks_path: Path, names: Mapping[str, str], *, suite_file: str) -> dict[str, Check]:
    """Resolve every property's `module:function` to a callable; errors name the property."""
    module = None
    resolved: dict[str, Check] = {}
    for prop_id, ref in names.items():
        mod_name, _, fn_name = ref.partition(":")
        where = f"property {prop_id}"
        if mod_name == "builtin":
            if fn_name not in BUILTINS:
                raise SuiteError(
                    f"no builtin check {fn_name!r} (have {', '.join(BUILTINS)})", file=suite_file, field=where
                )
            resolved[prop_id] = BUILTINS[fn_name]
            continue
        if mod_name != checks_path.stem:
            raise SuiteError(
                f"check {ref!r}: module must be {checks_path.stem!r} or 'builtin'", file=suite_file, field=where
            )
        if module is None:
            module = _import_file(checks_path, suite_file)
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            raise SuiteError(f"{checks_path.name} has no function {fn_name!r}", file=suite_file, field=where)
        resolved[prop_id] = fn
    return resolved


def _import_file(path: Path, suite_file: str) -> Any:
    try:
        found = path.is_file()
    except OSError:  # e.g. ENAMETOOLONG
        found = False
    if not found:
        raise SuiteError("checks module not found", file=str(path), field="suite.checks")
    name = f"probegate_checks_{abs(hash(path))}"
    # Read through the one reader that never blocks (a FIFO swapped in after is_file() is refused),
    # then run as the module's code: the import machinery would open the path itself.
    source = read_input(path, "checks module")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except (Exception, SystemExit) as exc:  # a module calling sys.exit() must not end the gate unexplained
        raise SuiteError(f"importing the checks module failed: {type(exc).__name__}: {exc}", file=str(path)) from None
    return module
