"""The invoice example as a repository (base commit, then a patch as a commit): the example's own
builder, examples/invoice/patch_repo.py, imported here so tests, benchmarks and run.sh build the same thing."""

from __future__ import annotations

import importlib.util
import sys

from .paths import INVOICE

_PATH = INVOICE / "patch_repo.py"
_spec = importlib.util.spec_from_file_location("patch_repo", _PATH)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
sys.modules["patch_repo"] = _module  # dataclasses look their module up
_spec.loader.exec_module(_module)

EXAMPLE = _module.EXAMPLE
Repo = _module.Repo
apply_patch = _module.apply_patch
example_repo = _module.example_repo
git = _module.git

__all__ = ["EXAMPLE", "Repo", "apply_patch", "example_repo", "git"]
