"""The argument parser both command lines (`gate`, `gate-worker`) build on, and the checks they share."""

from __future__ import annotations

import argparse

from gate.core.errors import UsageError


class ArgParser(argparse.ArgumentParser):
    """argparse that raises UsageError (exit 64): its own exit 2 would read as "harness broken"."""

    def error(self, message: str) -> None:
        raise UsageError(f"{self.prog}: {message}")


REDIS_SCHEMES = ("redis://", "rediss://")


def check_redis_url(url: str | None, field: str) -> str:
    """`url` when it is a redis:// or rediss:// URL; else UsageError naming `field` (never echoing the URL:
    it may hold a password)."""
    if not (url or "").startswith(REDIS_SCHEMES):
        raise UsageError("must be a redis:// or rediss:// URL", field=field)
    return url  # type: ignore[return-value]
