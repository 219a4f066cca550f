"""Loading the suite's checks module: resolve every property's `module:function` to a callable,
the builtin ones from `gate.core.checks`, the rest from the checks file named by the suite.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gate.core.checks import BUILTINS, Check
from gate.core.errors import SuiteError


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
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SuiteError("cannot import checks module", file=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a module calling sys.exit() must not end the gate unexplained
        raise SuiteError(f"importing the checks module failed: {type(exc).__name__}: {exc}", file=str(path)) from None
    return module
