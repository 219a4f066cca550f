"""Where the tests find the repository's own files, whichever folder under tests/ a test lives in."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INVOICE = ROOT / "examples" / "invoice"  # the first example: one property per band, a patch per kind
WINDOWS = ROOT / "examples" / "windows"  # the second: an ordinary repository with a project image
INTEGRATION = ROOT / "tests" / "integration"  # the integration tests' helpers and stand-in workers
