"""The decision core is pure: importing it loads no service client, no worker code and no logging."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import gate
import gate.core

# Every module under gate/core and its rooms, found by walking the package: a new core module is checked too.
CORE = sorted(info.name for info in pkgutil.walk_packages(gate.core.__path__, "gate.core."))
FORBIDDEN = ["docker", "celery", "redis", "kombu", "worker", "structlog", "logging"]
GATE_DIR = Path(gate.__file__).resolve().parent
CORE_DIR = GATE_DIR / "core"


@pytest.fixture(scope="module")
def loaded_modules() -> list[str]:
    """The sys.modules keys of a fresh interpreter after importing only the core modules."""
    code = f"import json, sys\nfor name in {CORE!r}:\n    __import__(name)\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, cwd=GATE_DIR.parent
    )
    return json.loads(done.stdout)


def _top_level(names: list[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


@pytest.mark.parametrize("package", ["docker", "celery", "redis", "kombu", "worker"])
def test_core_imports_no_service_or_worker_package(loaded_modules, package):
    """Importing the decision core loads none of docker, celery, redis, kombu or the worker package."""
    assert package not in _top_level(loaded_modules)


def test_core_imports_no_structlog(loaded_modules):
    """Importing the decision core does not load structlog."""
    assert "structlog" not in _top_level(loaded_modules)


def test_core_imports_no_adapter_modules(loaded_modules):
    """Importing the decision core loads none of the gate's other layers (io, run, cli)."""
    layers = ("gate.io", "gate.run", "gate.cli")
    assert [m for m in loaded_modules if m.startswith(layers)] == []


def test_core_modules_really_were_imported(loaded_modules):
    """The subprocess did import every core module (so the absence checks are meaningful)."""
    assert len(CORE) >= 15 and set(CORE) <= set(loaded_modules)


def _source_of(module: str) -> str:
    """The source of a core module or room (its __init__.py), by its dotted name."""
    path = CORE_DIR.joinpath(*module.split(".")[2:])
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


def _imports_of(module: str) -> set[str]:
    tree = ast.parse(_source_of(module))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("module", CORE)
def test_core_source_imports_no_logging_or_services(module):
    """No core module's source imports logging, structlog, a service client or the worker package."""
    assert _imports_of(module).isdisjoint(FORBIDDEN)


@pytest.mark.parametrize("module", CORE)
def test_core_source_reads_no_clock(module):
    """No core module calls datetime.now/utcnow/today or time.time: time is a parameter."""
    source = _source_of(module)
    for call in (".now(", ".utcnow(", ".today(", "time.time(", "time.monotonic("):
        assert call not in source, f"{module} calls {call}"
