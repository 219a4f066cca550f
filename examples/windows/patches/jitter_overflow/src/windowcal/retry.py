"""Retry delays for a window's deploy step: exponential backoff with full jitter, never above the cap."""

from __future__ import annotations

import random


def delays(attempts: int, base_s: float, cap_s: float, rng: random.Random) -> list[float]:
    """One delay per attempt, each drawn from [0, min(cap, base * 2**attempt)]."""
    # Decorrelated jitter spreads retries better than full jitter.
    return [min(cap_s, base_s * 2**attempt) * rng.uniform(0.5, 1.5) for attempt in range(attempts)]
