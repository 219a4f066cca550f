"""The argument parser both command lines (`gate`, `gate-worker`) build on."""

from __future__ import annotations

import argparse

from gate.core.errors import UsageError


class ArgParser(argparse.ArgumentParser):
    """argparse that raises UsageError (exit 64): its own exit 2 would read as "harness broken"."""

    def error(self, message: str) -> None:
        raise UsageError(f"{self.prog}: {message}")
