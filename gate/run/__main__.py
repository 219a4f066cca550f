"""`python -m gate.run …`: the notes' command form, the same command as `gate run …`."""

from __future__ import annotations

import sys

from gate.cli.main import entry

entry(["run", *sys.argv[1:]])
