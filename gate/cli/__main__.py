"""`python -m gate.cli …`: the same as the `gate` console script."""

from __future__ import annotations

import sys

from gate.cli.main import main

sys.exit(main())
