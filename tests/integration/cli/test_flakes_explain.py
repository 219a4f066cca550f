"""`gate flakes explain` on real Docker and git, over the deliberately flaky probes of `examples/flaky`:
the residual and a steady property named as such, a property that only the patch made flaky never
explained as a base flake, and a run without a base refused before any trial."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.paths import ROOT
from test_init import commit_all, gate, git

from gate.core.errors import RET_OK, RET_USAGE

pytestmark = pytest.mark.integration

EXAMPLE = ROOT / "examples" / "flaky"


@pytest.fixture
def flaky_repo(tmp_path: Path, sandbox_image: str) -> Path:
    """examples/flaky committed as the base of a fresh git repository."""
    root = tmp_path / "flaky"
    shutil.copytree(EXAMPLE, root)
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "the flaky example")
    return root


def explained(done) -> dict[str, dict]:
    return {line["property_id"]: line for line in map(json.loads, done.stdout.splitlines())}


def test_the_residual_and_a_steady_property_are_named_on_the_local_pool(flaky_repo: Path) -> None:
    """os.urandom flickers with every source held fixed (the residual, in a few trials); a property that
    never flickers is steady at 30 trials, explained by nothing; both in one call, exit 0."""
    done = gate(flaky_repo, "--log-level", "warning", "flakes", "explain", "flaky_entropy", "steady", "--base", "HEAD")
    assert done.returncode == RET_OK, done.stderr
    found = explained(done)
    entropy, steady = found["flaky_entropy"], found["steady"]
    assert (entropy["finding"], entropy["source"]) == ("residual", "residual")
    assert entropy["flickers_with"][0]["varied"] == [] and entropy["trials"] < 60
    assert "os.urandom" in entropy["words"]
    assert (steady["finding"], steady["source"], steady["trials"]) == ("steady", "", 30)
    assert steady["tried"][0]["hits"] == 30


def test_a_flake_only_the_patch_made_is_never_explained_as_a_base_flake(flaky_repo: Path) -> None:
    """A patch that makes `steady` toss a coin: explain with --base runs the base's tree and finds it
    steady; without --base or --allow-unchecked-oracle it is refused in one line before any trial."""
    probe = flaky_repo / "probe.py"
    probe.write_text(probe.read_text().replace('"steady": lambda: True', '"steady": lambda: os.urandom(1)[0] % 2 == 0'))
    commit_all(flaky_repo, "a patch that makes steady toss a coin")
    done = gate(flaky_repo, "--log-level", "warning", "flakes", "explain", "steady", "--base", "HEAD~1")
    assert done.returncode == RET_OK, done.stderr
    assert explained(done)["steady"]["finding"] == "steady"
    refused = gate(flaky_repo, "flakes", "explain", "steady")
    assert refused.returncode == RET_USAGE and refused.stdout == ""
    assert "--base" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
