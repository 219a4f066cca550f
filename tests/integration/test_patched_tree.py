"""The patched tree as git sees it, end to end on real git and Docker: a repository holding an ignored
virtualenv (with its lib64 -> lib link) and an ignored 70 MB node_modules, and product code reached
through in-tree symlinks, runs and is accepted; links out of the tree and trees too large for the
sandbox are refused in one line before any container starts."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import docker
import pytest
from celery_helpers import RedisServer, Workers
from example_repo import Repo, example_repo, git
from gate_runs import GATE, oracle_args, script_accept
from run_containers import run_counting_containers

from gate.core.errors import RET_CONFIG, RET_OK
from gate.core.suite.trial import Limits
from gate.core.testing import make_specs
from gate.io.snapshot import LocalInputs, tree_digest
from worker.celery.dispatch import CeleryExecutor

pytestmark = pytest.mark.integration

MB = 1 << 20


def linked_patch(tmp_path: Path) -> Repo:
    """The invoice example whose good product code is reached through symlinks: `invoicing/api.py ->
    real_api.py` (a file link) and `config/latest -> v2` (a folder link) holding the rounding step, read
    by the code at import. Committed with a .gitignore for .venv/ and node_modules/."""
    repo = example_repo(tmp_path / "repo")
    package = repo.app / "invoicing"
    source = (package / "api.py").read_text()
    step = 'CENT = Decimal("0.01")'
    assert step in source
    # The code also proves, inside the sandbox, that the folder link arrived as a link, not as a copy.
    through_link = (
        'assert Path("config/latest").is_symlink(), "config/latest arrived as a copy"\n'
        'CENT = Decimal(Path("config/latest/cent.txt").read_text())'
    )
    (package / "real_api.py").write_text(source.replace(step, through_link))
    (package / "api.py").unlink()
    os.symlink("real_api.py", package / "api.py")
    (repo.app / "config" / "v2").mkdir(parents=True)
    (repo.app / "config" / "v2" / "cent.txt").write_text("0.01")
    os.symlink("v2", repo.app / "config" / "latest")
    (repo.app / ".gitignore").write_text(".venv/\nnode_modules/\n")
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", "product code behind symlinks")
    return repo


def clutter(app: Path) -> None:
    """What a developer's checkout holds and git ignores: a virtualenv with its links (one to the host's
    python) and a 70 MB node_modules (sparse: fast to make, over every limit if it were copied)."""
    (app / ".venv" / "lib" / "python3.13" / "site-packages").mkdir(parents=True)
    (app / ".venv" / "lib" / "python3.13" / "site-packages" / "six.py").write_text("")
    os.symlink("lib", app / ".venv" / "lib64")
    (app / ".venv" / "bin").mkdir()
    os.symlink("/usr/bin/python3", app / ".venv" / "bin" / "python")
    (app / "node_modules" / "left-pad").mkdir(parents=True)
    with (app / "node_modules" / "left-pad" / "bundle.bin").open("wb") as handle:
        handle.truncate(70 * MB)


def gate_run(repo: Repo, card: Path, client: docker.DockerClient) -> tuple[int, str, int]:
    """`gate run --base` on the repository's app/ with a new ledger beside the card: (exit, stderr, containers)."""
    cmd = [str(GATE), "--log-level", "warning", "run", *oracle_args(repo), "--card", str(card), "--new-ledger"]
    done, created = run_counting_containers(client, cmd)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr, created


def test_a_repository_with_ignored_clutter_and_in_tree_links_runs_and_is_accepted(
    tmp_path: Path, docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    """The probe imports the product code through `api.py -> real_api.py` and reads `config/latest/cent.txt`
    through a linked folder, in the real sandbox, and every property passes; the ignored .venv and 70 MB
    node_modules are neither copied (the run fits the 64 MB work space) nor in the digest accept checks."""
    repo = linked_patch(tmp_path)
    clutter(repo.app)
    card = tmp_path / "card.json"
    code, stderr, created = gate_run(repo, card, docker_client)
    assert code == RET_OK, stderr
    assert created > 0  # the count sees this run's containers, so a zero elsewhere means none started
    accepted = script_accept(repo, card)
    assert accepted.returncode == 0, accepted.stdout
    with_clutter = tree_digest(repo.app)
    shutil.rmtree(repo.app / ".venv")
    shutil.rmtree(repo.app / "node_modules")
    assert tree_digest(repo.app) == with_clutter


@pytest.mark.parametrize("target", ["/etc/passwd", "../../secret"])
def test_a_link_out_of_the_tree_is_refused_in_one_line_before_any_container(
    tmp_path: Path, docker_client: docker.DockerClient, sandbox_image: str, target: str
) -> None:
    """A patch committing a symlink to the host's files (absolute, or climbing out with ..) is refused
    naming the link: exit 65, one line, no card, no container; accept on that tree refuses too."""
    repo = example_repo(tmp_path / "repo")
    (repo.app / "data").mkdir()
    os.symlink(target, repo.app / "data" / "leak.txt")
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", "a link to the host")
    card = tmp_path / "card.json"
    code, stderr, created = gate_run(repo, card, docker_client)
    assert (code, created, card.exists()) == (RET_CONFIG, 0, False)
    assert stderr.strip().splitlines() == [
        f"gate: error: {repo.app}: symlink data/leak.txt -> {target} "
        + ("is absolute" if target.startswith("/") else "points outside the tree")
        + "; the patched tree may only hold links that stay inside it"
    ]
    assert script_accept(repo, card).returncode != 0


def many_files(app: Path) -> None:
    for index in range(20_001):  # with the 3 files of app/, 4 over the default tree_files; empty files take no space
        (app / "gen" / f"{index // 1000}").mkdir(parents=True, exist_ok=True)
        (app / "gen" / f"{index // 1000}" / f"m{index}.py").touch()


def sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)


OVERSIZED = {
    "space": (
        lambda app: [sparse(app / "data" / f"part-{i}.bin", 20 * MB) for i in range(3)],
        "tree is 60.0 MB (each file in whole 4 KiB pages), over 48 MB: 3/4 of the sandbox's 64 MB work space, "
        "the rest left for the probe's writes; exclude files ([suite] exclude, .gitignore) or raise "
        "[suite.limits] tmpfs_mb",
    ),
    "largest": (
        lambda app: sparse(app / "data" / "model.bin", 70 * MB),
        "data/model.bin is 70.0 MB, over the sandbox's 64 MB file size limit; exclude it ([suite] exclude, "
        ".gitignore) or raise [suite.limits] file_size_mb",
    ),
    "count": (
        many_files,
        "tree holds 20004 files and symlinks, over the sandbox's limit of 20000; exclude files ([suite] "
        "exclude, .gitignore) or raise [suite.limits] tree_files",
    ),
}


@pytest.mark.parametrize("kind", sorted(OVERSIZED))
def test_a_tree_too_large_for_the_sandbox_is_refused_before_any_container(
    tmp_path: Path, docker_client: docker.DockerClient, sandbox_image: str, kind: str
) -> None:
    """Untracked (not ignored, so selected) files over the work space, the file size limit or the file
    count: `gate run` exits 65 with one line naming the limit and how to raise it; no container was
    created, no card written, no ledger touched."""
    repo = example_repo(tmp_path / "repo")
    grow, message = OVERSIZED[kind]
    grow(repo.app)
    card = tmp_path / "card.json"
    code, stderr, created = gate_run(repo, card, docker_client)
    assert (code, created, card.exists()) == (RET_CONFIG, 0, False), stderr
    assert stderr.strip().splitlines() == [f"gate: error: {repo.app}: {message}"]
    assert not (tmp_path / "ledger.json").exists()


LINK_PROBE = """\
import json, os
import link
print(json.dumps({"x": link.X, "note": open("docs/latest/note.txt").read(), "is_link": os.path.islink("link.py")}))
"""


def test_a_tree_with_symlinks_runs_through_celery_workers(
    tmp_path: Path, workers: Workers, redis_server: RedisServer, run_id: str
) -> None:
    """Over Celery the snapshot travels as a tar blob with its links; the worker unpacks it (tar "data"
    filter), re-seals it to the run's digest, and the probe imports through `link.py -> real.py` and reads
    through `docs/latest -> v2`, writing nothing."""
    tree = tmp_path / "tree"
    (tree / "docs" / "v2").mkdir(parents=True)
    (tree / "docs" / "v2" / "note.txt").write_text("v2")
    (tree / "real.py").write_text("X = 7\n")
    (tree / "probe.py").write_text(LINK_PROBE)
    os.symlink("real.py", tree / "link.py")
    os.symlink("v2", tree / "docs" / "latest")
    fixture = b"{}"
    workers.start("w1", concurrency=1)
    workers.wait_ready()
    executor = CeleryExecutor(redis_server.url, worker_wait_s=30)
    with LocalInputs(tree, {hashlib.sha256(fixture).hexdigest(): fixture}) as inputs:
        specs = make_specs(
            2,
            run_id=run_id,
            property_id="links",
            tree_digest=inputs.tree_digest,
            fixture_digest=hashlib.sha256(fixture).hexdigest(),
            deadline_s=10.0,
        )
        executor.open(run_id, Limits())
        try:
            seen = list(executor.run(specs, inputs))
        finally:
            executor.close(run_id)
    assert len(seen) == 2
    for obs in seen:
        assert obs.fault is None and obs.exit_code == 0, (obs.fault, obs.stderr.data[-500:])
        assert json.loads(obs.stdout.data) == {"x": 7, "note": "v2", "is_link": True}
        assert obs.writes == ()


REPLACE_LINK = """
    import os
    os.unlink("link.py")
    with open("link.py", "w") as handle:
        handle.write("X = 1\\n")  # the target's very bytes, as a file
"""


def test_a_probe_that_replaces_a_link_is_seen_writing(observe, make_trial) -> None:
    """In the real sandbox a link of the tree is laid out as a link, and a probe replacing it with a file
    holding the target's bytes is a write (modified), like any other."""
    spec, inputs = make_trial(REPLACE_LINK, extra={"real.py": "X = 1\n"})
    os.symlink("real.py", inputs.tree_dir(spec.tree_digest) / "link.py")
    obs = observe(spec, inputs)
    assert obs.exit_code == 0, obs.stderr.data
    assert [(w.path, w.change) for w in obs.writes] == [("/work/link.py", "modified")]
