"""What a worker takes from a message or a flag about run images, checked without any service:
the wait a batch asks for is bounded, and a registry must be a plain host[:port][/path]."""

from __future__ import annotations

import pytest

from gate.core.errors import UsageError
from worker.celery.shared.imagenames import registry_repository
from worker.celery.worker.tasks import MAX_IMAGE_WAIT_S, bounded_wait


@pytest.mark.parametrize(
    ("asked", "waited"),
    [
        (0, 0.0),
        (12.5, 12.5),
        (-3, 0.0),
        (float("nan"), 0.0),
        (float("inf"), 0.0),
        (1e12, MAX_IMAGE_WAIT_S),
        ("300", 0.0),
        (None, 0.0),
        ([5], 0.0),
    ],
)
def test_a_batchs_image_wait_is_bounded(asked: object, waited: float) -> None:
    """Whatever a message asks, a worker waits between 0 and MAX_IMAGE_WAIT_S for a publication (NaN: 0)."""
    assert bounded_wait(asked) == waited


@pytest.mark.parametrize("registry", ["127.0.0.1:5000", "registry.internal", "reg-1.example:443/team/ns"])
def test_a_plain_registry_names_the_project_repository(registry: str) -> None:
    """host[:port][/path] is taken, and images live under probegate/project in it."""
    assert registry_repository(registry) == f"{registry}/probegate/project"


@pytest.mark.parametrize(
    "registry", ["http://127.0.0.1:5000", "127.0.0.1:5000/", "-bad.host", "host:port", "host/Upper", "a b", ""]
)
def test_a_registry_with_a_scheme_or_junk_is_a_usage_error(registry: str) -> None:
    """A scheme, a trailing slash, spaces or an uppercase path are refused before anything starts."""
    with pytest.raises(UsageError, match="--registry must be host"):
        registry_repository(registry)
