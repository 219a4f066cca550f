"""Fixtures for every test, unit and integration alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def keep_logging() -> Iterator[None]:
    """`main()` run in-process points structlog at the test's captured stderr, which closes after it: put
    the configuration back, or every later test that logs fails on a closed file."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
