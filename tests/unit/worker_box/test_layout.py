"""probeproc.layout: what the supervisor execs inside it runs without ASLR, and the supervisor's own
personality comes back after. Linux only (personality(2)); no Docker needed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from worker.box.probeproc import ADDR_NO_RANDOMIZE, layout

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="personality(2) is Linux's")

READ = "import ctypes; p = ctypes.CDLL(None).personality; p.argtypes = [ctypes.c_ulong]; print(p(0xFFFFFFFF))"


def personality_of_a_child() -> int:
    return int(subprocess.run([sys.executable, "-c", READ], capture_output=True, text=True, check=True).stdout)


def test_a_child_started_inside_layout_off_has_no_randomisation_and_ours_comes_back():
    """Inside layout(False) a child's personality has ADDR_NO_RANDOMIZE; before and after, and inside
    layout(True), it has not."""
    assert not personality_of_a_child() & ADDR_NO_RANDOMIZE
    with layout(True):
        assert not personality_of_a_child() & ADDR_NO_RANDOMIZE
    with layout(False):
        assert personality_of_a_child() & ADDR_NO_RANDOMIZE
    assert not personality_of_a_child() & ADDR_NO_RANDOMIZE
