"""The second example end to end (examples/windows): an ordinary repository with a src/ layout and
PyPI dependencies in a project image, a `.venv`, an ignored 80 MB `node_modules` and an in-tree
symlink. Each agent-style patch earns its kind through the local pool and through Celery workers
that received the project image by content; the good patch is accepted; editing the lock is refused."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from gate_runs import UNENROLLED
from second_engine import SecondEngine
from support.paths import WINDOWS as EXAMPLE
from support.servers import RedisServer, Workers
from support.zygote import gate_command

# By path and under its own name: the invoice example has a `patch_repo` module too.
_spec = importlib.util.spec_from_file_location("windows_patch_repo", EXAMPLE / "patch_repo.py")
assert _spec is not None and _spec.loader is not None
_patch_repo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_patch_repo)
example_repo = _patch_repo.example_repo

GATE = Path(sys.executable).with_name("gate")
CARD = Path(".probegate") / "verdict-card.json"
PASS = "pass"

# patch → (gate run exit, gate accept exit, the property that catches it and its kind)
EXPECTED: dict[str, tuple[int, int, str | None, str]] = {
    "good": (0, 0, None, PASS),
    "unsafe_yaml": (1, 1, "no_code_from_yaml", "fail_safety"),
    "leaks_env": (1, 1, "no_secret_in_errors", "fail_safety"),
    "naive_windows": (1, 1, "windows_in_utc", "fail_contract"),
    "lenient_keys": (1, 1, "rejects_unknown_keys", "fail_contract"),
    "jitter_overflow": (0, 1, "delays_within_cap", "inconclusive_sample"),
    "edits_lock": (1, 1, None, PASS),
}


def gate(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = gate_command(None, str(GATE), ["--log-level", "warning", *args], cwd=repo, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def run_patch(tmp_path: Path, patch: str, *extra: str, interpreter: str | None = None) -> tuple[int, int, dict]:
    """Commit `patch` over the example's base (its suite's interpreter mode set when given), then `gate run
    --base` and `gate accept --base` in the repo (no --seal or --card: gate.toml names them); (run exit,
    accept exit, card)."""
    repo = tmp_path / f"repo-{patch}"
    base = example_repo(repo, patch, interpreter=interpreter)
    ran = gate(repo, "run", "--base", base, "--new-ledger", *extra)
    card = json.loads((repo / CARD).read_text())
    accepted = gate(repo, "accept", "--base", base, *(a for a in extra if a == UNENROLLED))
    return ran.returncode, accepted.returncode, card


def assert_earned(patch: str, ran: int, accepted: int, card: dict) -> None:
    want_run, want_accept, prop, kind = EXPECTED[patch]
    kinds = {row["id"]: row["kind"] for row in card["properties"]}
    # Messages as strings, shown whole (pytest cuts a dict's repr short): each row's kind and detail.
    said = json.dumps({row["id"]: [row["kind"], row["detail"]] for row in card["properties"]})
    assert (ran, accepted) == (want_run, want_accept), f"{patch}: {said} {card.get('new_oracle_edits')}"
    if prop is None:
        assert set(kinds.values()) == {PASS}, said
    else:
        assert kinds[prop] == kind, said
        assert all(k == PASS for name, k in kinds.items() if name != prop), said
    assert card["image_id"].startswith("sha256:") and card["image_id"] != ""


@pytest.mark.kinds
@pytest.mark.parametrize("patch", sorted(EXPECTED))
def test_each_patch_earns_its_kind_through_the_local_pool(
    patch: str, tmp_path: Path, windows_project_image: str, gate_modes: str
) -> None:
    """Through the local pool, each patch gets the exit codes and kind of the example's table; with copied work
    dirs and warm interpreters forced (the project image's PyYAML and dateutil pre-imported) the card says so."""
    ran, accepted, card = run_patch(tmp_path, patch)
    assert_earned(patch, ran, accepted, card)
    if gate_modes == "copy+warm":  # the forced modes reached the run
        assert card["work_copy"] == "copy", card["harness_events"]
        assert card["interpreter"] == "warm" and card["hash_seeds"] >= 1, card["harness_events"]
    if patch == "edits_lock":
        assert card["new_oracle_edits"] == ["requirements.lock"]


@pytest.fixture
def far_workers(redis_server: RedisServer, tmp_path: Path, docker_client) -> Iterator[tuple[Workers, object]]:
    """A gate-worker on a second, private engine that holds only the base image: it must receive
    the project image by content (chunks in Redis) before running anything."""
    engine = SecondEngine()
    try:
        far = engine.start(docker_client)
        pool = Workers(redis_server.url, tmp_path, env=engine.env)
        pool.start("far", concurrency=2)
        pool.wait_ready()
        try:
            yield pool, far
        finally:
            pool.stop_all()
    finally:
        engine.stop()


def test_each_patch_earns_its_kind_through_celery_workers_that_fetched_the_image(
    far_workers: tuple[Workers, object], redis_server: RedisServer, tmp_path: Path, windows_project_image: str
) -> None:
    """Through a Celery worker on another engine, each patch earns the same kind; that engine had only the
    base image, and the project image it ran in arrived by content (fetched once, then found)."""
    _, far = far_workers
    # Warm interpreters: each trial forks from a Python that imported PyYAML and dateutil once per parent (the
    # local tests meet both modes). The first patch runs alone and fetches the image; the others then run two at
    # a time, one per process of the far worker, so one run's coordinator work overlaps another's trials.
    flags = ("--broker", redis_server.url, UNENROLLED, "--interpreter", "warm")
    first, *rest = sorted(EXPECTED)
    earned = {first: run_patch(tmp_path, first, *flags)}
    with ThreadPoolExecutor(max_workers=2) as lanes:
        earned.update(zip(rest, lanes.map(lambda patch: run_patch(tmp_path, patch, *flags), rest), strict=True))
    fetched = []
    for patch in sorted(EXPECTED):
        ran, accepted, card = earned[patch]
        assert_earned(patch, ran, accepted, card)
        assert card["interpreter"] == "warm", card["harness_events"]
        fetched += [event for event in card["harness_events"] if event["kind"] == "image_fetched"]
        assert far.images.get(card["image_id"]).id == card["image_id"]
    assert len(fetched) >= 1 and "chunks" in fetched[0]["detail"], fetched
