"""The command line and the composition root: the only place in `gate` that chooses concrete
executors and sandboxes, and so the only one that imports `worker`.
"""

from __future__ import annotations

from gate.cli.main import entry, main

__all__ = ["entry", "main"]
