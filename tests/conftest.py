"""Fixtures and collection rules for every test, unit and integration alike."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog


@pytest.hookimpl(tryfirst=True)  # before xdist groups by xdist_group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):
        # An xdist worker: the tests that need the machine to themselves never run here, whatever -m said;
        # `pytest -m serial` runs them after the parallel run (README, the test command).
        alone = [item for item in items if item.get_closest_marker("serial")]
        if alone:
            config.hook.pytest_deselected(items=alone)
            items[:] = [item for item in items if not item.get_closest_marker("serial")]


class LoadGroupNodeIds:
    """xdist's --dist loadgroup sends the tests of one xdist_group to one worker by suffixing their node ids
    with `@group` (xdist 3.8 sets `item._nodeid`). pytest 9.2 derives `nodeid` from `item._id` instead, so
    the suffix is lost and a group's tests spread over workers, each making the group's module fixtures
    again. Put the suffix where pytest reads it (a no-op where xdist's own one took effect)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        try:
            from _pytest.nodeid import coerce_node_id
        except ImportError:  # pytest before 9.2: xdist's suffix works
            return
        if not config.getvalue("loadgroup"):
            return
        for item in items:
            marks = item.iter_markers("xdist_group")
            groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
            if groups and "@" not in item.nodeid.rsplit("]", 1)[-1]:
                item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(LoadGroupNodeIds(), "probegate-loadgroup-node-ids")


@pytest.fixture(autouse=True)
def keep_logging() -> Iterator[None]:
    """`main()` run in-process points structlog at the test's captured stderr, which closes after it: put
    the configuration back, or every later test that logs fails on a closed file."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture(autouse=True)
def keep_worker_settings() -> Iterator[None]:
    """`gate-worker`'s `main()` run in-process configures this process's worker settings: put them back."""
    from worker.celery.worker import settings

    saved = settings._configured
    yield
    settings.configure(saved) if saved is not None else setattr(settings, "_configured", None)


@pytest.fixture(autouse=True, scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The coordinator's state folder (run journals, gate.io.journal) for this test process and the gate
    processes it starts: never the user's own."""
    folder = tmp_path_factory.mktemp("state")
    before = os.environ.get("PROBEGATE_STATE_DIR")
    os.environ["PROBEGATE_STATE_DIR"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("PROBEGATE_STATE_DIR", None)
    else:
        os.environ["PROBEGATE_STATE_DIR"] = before
