"""`python -m gate.accept …`: the notes' command form, the same command as `gate accept …`."""

from __future__ import annotations

import sys

from gate.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["accept", *sys.argv[1:]]))
