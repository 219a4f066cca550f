"""Shared settings and fixtures for the unit tests: a fast, deterministic hypothesis profile, no
inherited GitHub step summary, and one real card to vary."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from support.mini_suite import build_suite, good, run

from gate.core.card.card import VerdictCard
from gate.io.reports import STEP_SUMMARY_ENV

settings.register_profile(
    "unit",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("unit")


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run in CI too: an inherited $GITHUB_STEP_SUMMARY must not receive (or refuse) their reports."""
    monkeypatch.delenv(STEP_SUMMARY_ENV, raising=False)


@pytest.fixture(scope="module")
def card(tmp_path_factory: pytest.TempPathFactory) -> VerdictCard:
    """A real card from one clean run of the mini suite (safety, contract, statistical), to vary row by row."""
    result, _ = run(build_suite(tmp_path_factory.mktemp("suite")), good)
    return result.card
