"""Shared settings for the pure-core unit tests: a fast, deterministic hypothesis profile."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "unit",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("unit")
