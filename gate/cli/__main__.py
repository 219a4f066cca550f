"""`python -m gate.cli …`: the same as the `gate` console script."""

from __future__ import annotations

from gate.cli.main import entry

entry()
