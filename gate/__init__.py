"""probegate: seal the fixtures, run the probe in a sandbox, type the verdict, stamp the card."""

from __future__ import annotations

__version__ = "0.2.0"
