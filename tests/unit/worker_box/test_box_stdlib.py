"""worker.box is mounted into an image that holds nothing but Python: every import in it is stdlib or a sibling."""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

import worker.box

BOX_DIR = Path(worker.box.__file__).resolve().parent


def foreign_imports(box_dir: Path) -> list[str]:
    """Every import under box_dir that is not stdlib, __future__ or a sibling, as "file:line: module"."""
    files = sorted(box_dir.rglob("*.py"))
    siblings = {path.stem for path in files if path.stem != "__init__"}
    allowed_paths = {f"worker.box.{sibling}" for sibling in siblings}

    def allowed(module: str) -> bool:
        return (
            module.split(".")[0] in sys.stdlib_module_names
            or module == "__future__"
            or module in siblings
            or module in allowed_paths
        )

    found = []
    for path in files:
        where = path.relative_to(box_dir)
        # ast.walk reaches imports nested in try/except, functions and classes as well as top-level ones.
        nodes = ast.walk(ast.parse(path.read_text(), filename=str(path)))
        for node in sorted((n for n in nodes if isinstance(n, ast.Import | ast.ImportFrom)), key=lambda n: n.lineno):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif node.level:
                # A relative import fails when the files run as scripts with their siblings by bare name.
                modules = ["." * node.level + (node.module or "")]
            elif node.module == "worker.box":
                modules = [f"worker.box.{alias.name}" for alias in node.names]
            else:
                modules = [node.module or ""]
            found += [f"{where}:{node.lineno}: {module}" for module in modules if not allowed(module)]
    return found


def test_box_imports_only_stdlib_and_siblings():
    """No .py file under worker/box imports anything but the standard library, __future__ or a box sibling."""
    assert foreign_imports(BOX_DIR) == []


def test_box_check_sees_the_sibling_imports():
    """The check is not vacuous: supervisor.py's bare and package-path sibling imports are among what it parses."""
    tree = ast.parse((BOX_DIR / "supervisor.py").read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {"fsdiff", "probeproc", "worker.box.fsdiff", "worker.box.probeproc"} <= modules


def test_added_third_party_import_is_flagged(tmp_path):
    """A copy of the box with `import requests` appended to fsdiff.py is reported with that file, line and module."""
    box = tmp_path / "box"
    shutil.copytree(BOX_DIR, box, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    fsdiff = box / "fsdiff.py"
    source = fsdiff.read_text()
    source += ("" if source.endswith("\n") else "\n") + "import requests\n"
    fsdiff.write_text(source)
    assert foreign_imports(box) == [f"fsdiff.py:{len(source.splitlines())}: requests"]


def test_nested_and_package_imports_are_flagged(tmp_path):
    """Imports hidden in a function or try block, of gate, of worker.host or relative, are all reported."""
    box = tmp_path / "box"
    shutil.copytree(BOX_DIR, box, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (box / "extra.py").write_text(
        "def f():\n"
        "    import yaml\n"
        "try:\n"
        "    from gate.core.verdicts import verdict\n"
        "except ImportError:\n"
        "    from worker.host.sweep import sweep\n"
        "from . import fsdiff\n"
        "from worker.box import fsdiff, docker\n"
        "import os.path, json\n"
    )
    assert foreign_imports(box) == [
        "extra.py:2: yaml",
        "extra.py:4: gate.core.verdicts",
        "extra.py:6: worker.host.sweep",
        "extra.py:7: .",
        "extra.py:8: worker.box.docker",
    ]
