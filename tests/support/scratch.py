"""Scratch folders for tests that write and remove many small trees (one per hypothesis example)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MEMORY = Path("/dev/shm")


@contextmanager
def memory_scratch(prefix: str = "probegate-") -> Iterator[Path]:
    """A fresh empty folder, removed afterwards, in memory (/dev/shm) where the machine has one writable: on
    the CI machine's ext4 each file or folder made and removed costs about 1 ms, in memory a few microseconds."""
    base = str(MEMORY) if MEMORY.is_dir() and os.access(MEMORY, os.W_OK | os.X_OK) else None
    with tempfile.TemporaryDirectory(prefix=prefix, dir=base) as tmp:
        yield Path(tmp)
