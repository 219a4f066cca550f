"""The sandbox image's definition as the package ships it, for tests that compare an image with it."""

from __future__ import annotations

from importlib import resources

from worker.host.imagesetup import DEFINITION


def definition_tag() -> str:
    """The tag the definition builds (its TAG file; engine.DEFAULT_IMAGE must equal it)."""
    return (resources.files("worker.host") / DEFINITION / "TAG").read_text(encoding="utf-8").strip()
