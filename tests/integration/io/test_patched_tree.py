"""The patched tree (gate.io.patchedtree, gate.io.snapshot), from the rules for reading it to real runs.

Reading it needs no service: in-tree symlinks travel as symlinks and are digested; links that lead out
of the tree are refused naming them; no link is ever followed on the host. End to end on real git and
Docker (the tests marked integration): a repository holding an ignored virtualenv (with its lib64 -> lib
link) and an ignored 70 MB node_modules, and product code reached through in-tree symlinks, runs and is
accepted; links out of the tree and trees too large for the sandbox are refused in one line before any
container starts; a tree with links travels through Celery workers; a probe replacing a link is a write."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import docker
import pytest
from gate_runs import GATE, oracle_args, script_accept
from run_containers import run_counting_containers
from support.example_repo import Repo, example_repo, git
from support.git_trees import isolated_git, write
from support.git_trees import repo as git_repo
from support.servers import RedisServer, Workers

from gate.core.errors import RET_CONFIG, RET_OK, FixtureTreeError, InputMissingError, TreeTooLargeError
from gate.core.suite.trial import Limits
from gate.core.testing import make_specs
from gate.io.fixtures import seal_tree
from gate.io.patchedtree import copy_tree, laid_out, link_problem, read_patched_tree, scan_tree, seal_patched
from gate.io.snapshot import LocalInputs, lay_over, tree_digest, world_readable
from gate.io.treeselect import select_paths
from worker.celery.coordinator.dispatch import CeleryExecutor

__all__ = ["isolated_git"]  # the autouse fixture (git without the user's or the system's configuration)

SECRET = "host-secret-4f1c"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the tree holding a secret the tree must never reach on the host."""
    return write(tmp_path / "outside", {"mod.py": f"KEY = '{SECRET}'\n", "secret": SECRET})


def linked_repo(root: Path) -> Path:
    return git_repo(
        root,
        {"real.py": "X = 1\n", "docs/v2/index.md": "# v2\n", "probe.py": "import link\n"},
        {"link.py": "real.py", "docs/latest": "v2"},
    )


def test_in_tree_symlinks_travel_as_links_and_a_linked_folder_is_listed_once(tmp_path: Path) -> None:
    """`link.py -> real.py` and `docs/latest -> v2` are entries of the tree; v2's files are listed once."""
    tree = read_patched_tree(linked_repo(tmp_path / "r"))
    assert tree.links == {"docs/latest": "v2", "link.py": "real.py"}
    assert sorted(tree.files) == ["docs/v2/index.md", "probe.py", "real.py"]


def test_the_snapshot_keeps_links_as_links_and_digests_as_accept_recomputes(tmp_path: Path) -> None:
    """LocalInputs copies links as links (no file copied through them) and its digest is tree_digest's."""
    root = linked_repo(tmp_path / "r")
    with LocalInputs(root, {}) as inputs:
        snap = inputs.snapshot
        assert os.readlink(snap / "link.py") == "real.py" and os.readlink(snap / "docs" / "latest") == "v2"
        assert (snap / "link.py").read_text() == "X = 1\n"
        assert inputs.tree_digest == tree_digest(root)


def test_retargeting_a_link_changes_the_digest(tmp_path: Path) -> None:
    """A link's target is part of the digest: pointing `docs/latest` at another folder is another tree."""
    root = linked_repo(tmp_path / "r")
    write(root, {"docs/v1/index.md": "# v1\n"})
    before = tree_digest(root)
    (root / "docs" / "latest").unlink()
    os.symlink("v1", root / "docs" / "latest")
    assert tree_digest(root) != before


def test_a_tracked_file_made_a_link_to_another_file_gets_another_digest(tmp_path: Path) -> None:
    """A patch that turns `a.py` into a symlink to `real.py` does not seal like a plain `a.py` holding
    real.py's bytes, nor like one holding the name `real.py`."""
    root = git_repo(tmp_path / "r", {"real.py": "X = 1\n", "a.py": "X = 1\n"})
    plain_copy = tree_digest(root)
    (root / "a.py").write_text("real.py")
    plain_name = tree_digest(root)
    (root / "a.py").unlink()
    os.symlink("real.py", root / "a.py")
    assert tree_digest(root) not in (plain_copy, plain_name)


def test_a_tree_of_text_files_keeps_the_fixture_recipes_digest(tmp_path: Path) -> None:
    """Without links or NUL bytes the patched tree's digest is seal_tree's, as before symlinks were allowed."""
    root = write(tmp_path / "t", {"probe.py": "print(1)\n", "pkg/mod.py": "X = 1\n"})
    assert tree_digest(root) == seal_tree(root).digest


@pytest.mark.parametrize(
    ("link", "target", "why"),
    [
        ("passwd", "/etc/passwd", "is absolute"),
        ("docs/secret", "../../secret", "points outside the tree"),
        ("up", "..", "points outside the tree"),
        ("x", "a/up/..", "climbs (..) out of a/up, itself a link"),
    ],
)
def test_a_link_leading_out_of_the_tree_is_refused_naming_it(tmp_path: Path, link: str, target: str, why: str) -> None:
    """An absolute link, one that climbs out with `..`, or one that climbs out through another link of the
    tree is one FixtureTreeError line naming the link, its target and the work folder."""
    root = git_repo(tmp_path / "r", {"a/file.py": "", "docs/x.md": ""}, {"a/up": "..", link: target})
    with pytest.raises(FixtureTreeError) as caught:
        read_patched_tree(root)
    assert str(caught.value) == (
        f"{root}: symlink {link} -> {target} {why}; the patched tree may only hold links that stay inside it"
    )


def test_lexical_link_rules() -> None:
    """A link may point at its own folder, a sibling or the root; not above the root, nor climb out through a link."""
    links = {"a/up": "..", "d/latest": "v2"}
    assert link_problem("d/latest", "v2", links) == ""
    assert link_problem("a/up", "..", links) == ""
    assert link_problem("a/here", ".", links) == ""
    assert link_problem("x", "d/latest/../v1", links) == "climbs (..) out of d/latest, itself a link"
    assert link_problem("x", "d/./v2/../v1", links) == ""
    assert link_problem("a/b", "../../x", links) == "points outside the tree"
    assert link_problem("x", "//etc", links) == "is absolute"


def test_a_folder_swapped_for_a_link_after_selection_is_never_followed(tmp_path: Path, outside: Path) -> None:
    """A tracked folder replaced by a link to a folder outside the tree after the paths were selected: the
    scan sees the link (refused as escaping), never the files behind it."""
    root = git_repo(tmp_path / "r", {"pkg/mod.py": "KEY = None\n", "probe.py": ""})
    paths = select_paths(root)
    (root / "pkg" / "mod.py").unlink()
    (root / "pkg").rmdir()
    os.symlink(outside, root / "pkg")
    tree = scan_tree(root, paths)
    assert "pkg/mod.py" not in tree.files  # beneath a link: absent, as git sees it
    with pytest.raises(FixtureTreeError, match=r"symlink pkg -> .* is absolute"):
        scan_tree(root, [*paths, "pkg"])


@pytest.mark.parametrize("swap", ["folder", "file"])
def test_an_entry_swapped_for_a_link_after_the_scan_is_never_read_through(
    tmp_path: Path, outside: Path, swap: str
) -> None:
    """Between the scan and the read (seal or copy), a file or its folder swapped for a link to the host's
    files makes the read fail; the secret behind the link is never read into a seal or a snapshot."""
    root = git_repo(tmp_path / "r", {"pkg/mod.py": "KEY = None\n"})
    tree = read_patched_tree(root)
    if swap == "folder":
        (root / "pkg" / "mod.py").unlink()
        (root / "pkg").rmdir()
        os.symlink(outside, root / "pkg")
    else:
        (root / "pkg" / "mod.py").unlink()
        os.symlink(outside / "mod.py", root / "pkg" / "mod.py")
    with pytest.raises(InputMissingError):
        seal_patched(tree)
    with pytest.raises(InputMissingError):
        copy_tree(tree, tmp_path / "copy")
    copied = [p.read_text() for p in (tmp_path / "copy").rglob("*") if p.is_file() and not p.is_symlink()]
    assert not any(SECRET in text for text in copied)


def test_a_special_file_is_refused(tmp_path: Path) -> None:
    """A fifo (or device) in the tree cannot be copied or sealed: refused naming it."""
    root = write(tmp_path / "t", {"probe.py": ""})
    os.mkfifo(root / "pipe")
    with pytest.raises(FixtureTreeError, match="pipe is not a regular file or a symlink"):
        read_patched_tree(root)


def test_the_probe_entry_is_laid_over_a_linked_folder_not_written_through_it(tmp_path: Path) -> None:
    """The base's probe entry replaces a link the patch put on its way (here `tools -> other`) with a real
    folder, so the write never lands where the link points."""
    snap = write(tmp_path / "snap", {"other/probe.py": "patched\n"})
    os.symlink("other", snap / "tools")
    lay_over(snap, "tools/probe.py", b"base\n")
    assert (snap / "tools").is_dir() and not (snap / "tools").is_symlink()
    assert (snap / "tools" / "probe.py").read_bytes() == b"base\n"
    assert (snap / "other" / "probe.py").read_text() == "patched\n"


def test_world_readable_leaves_links_alone_even_dangling_ones(tmp_path: Path) -> None:
    """Making a snapshot readable does not chmod through links, nor fail on one whose target is absent."""
    root = write(tmp_path / "t", {"a.py": ""})
    (root / "a.py").chmod(0o600)
    os.symlink("missing.py", root / "dangling.py")
    world_readable(root)
    assert (root / "a.py").stat().st_mode & 0o777 == 0o644


def test_a_tree_too_large_is_refused_before_it_is_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With limits, LocalInputs refuses a tree over them in one line and leaves no snapshot behind."""
    root = write(tmp_path / "t", {f"f{i}.py": "" for i in range(5)})
    # A temporary folder of this test's own: other tests' snapshots come and go in the shared one meanwhile.
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    with pytest.raises(TreeTooLargeError, match=r"tree holds 5 files and symlinks, over the sandbox's limit of 4"):
        LocalInputs(root, {}, limits=Limits(tree_files=4))
    assert list(private.iterdir()) == []


def test_an_unpacked_copy_is_checked_like_the_work_tree(tmp_path: Path) -> None:
    """`laid_out` (a snapshot, an unpacked blob) sees every entry, links included, and refuses escaping ones."""
    root = write(tmp_path / "t", {"a.py": ""})
    os.symlink("a.py", root / "b.py")
    assert laid_out(root).links == {"b.py": "a.py"}
    os.symlink("../../etc", root / "c")
    with pytest.raises(FixtureTreeError, match=r"symlink c -> \.\./\.\./etc points outside the tree"):
        laid_out(root)


def test_a_git_tree_snapshot_leaves_out_what_git_ignores(tmp_path: Path) -> None:
    """The run's snapshot holds git's selection: an ignored folder (with its own links) is not copied."""
    root = git_repo(tmp_path / "r", {".gitignore": ".venv/\n", "app.py": ""})
    write(root, {".venv/lib/site.py": ""})
    os.symlink("lib", root / ".venv" / "lib64")
    os.symlink("/usr/bin/python3", root / ".venv" / "python")
    # The links under .venv (one leading out of the tree) are ignored, so never copied nor refused.
    with LocalInputs(root, {}) as inputs:
        assert sorted(p.name for p in inputs.snapshot.iterdir()) == [".gitignore", "app.py"]


# --- end to end: real git, Docker and Celery -------------------------------------------------------------

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


@pytest.mark.integration
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


@pytest.mark.integration
def test_a_link_out_of_the_tree_is_refused_in_one_line_before_any_container(
    tmp_path: Path, docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    """A patch committing a symlink to the host's files is refused naming the link: exit 65, one line, no
    card, no container; accept on that tree refuses too. (Every kind of escaping link, and its line, is
    test_a_link_leading_out_of_the_tree_is_refused_naming_it's: they all take this path.)"""
    repo = example_repo(tmp_path / "repo")
    (repo.app / "data").mkdir()
    os.symlink("/etc/passwd", repo.app / "data" / "leak.txt")
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", "a link to the host")
    card = tmp_path / "card.json"
    code, stderr, created = gate_run(repo, card, docker_client)
    assert (code, created, card.exists()) == (RET_CONFIG, 0, False)
    assert stderr.strip().splitlines() == [
        f"gate: error: {repo.app}: symlink data/leak.txt -> /etc/passwd is absolute; "
        "the patched tree may only hold links that stay inside it"
    ]
    assert script_accept(repo, card).returncode != 0


def many_files(app: Path) -> None:
    for index in range(20_001):  # with app/'s own files, over the default tree_files; empty files take no space
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
        "tree holds {count} files and symlinks, over the sandbox's limit of 20000; exclude files ([suite] "
        "exclude, .gitignore) or raise [suite.limits] tree_files",
    ),
}


@pytest.mark.integration
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
    if kind == "count":  # the generated files and app/'s own (which the examples may grow)
        count = int(stderr.split("tree holds ")[1].split()[0])
        assert count > 20_001, stderr
        message = message.format(count=count)
    assert stderr.strip().splitlines() == [f"gate: error: {repo.app}: {message}"]
    assert not (tmp_path / "ledger.json").exists()


LINK_PROBE = """\
import json, os
import link
print(json.dumps({"x": link.X, "note": open("docs/latest/note.txt").read(), "is_link": os.path.islink("link.py")}))
"""


@pytest.mark.integration
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


@pytest.mark.integration
def test_a_probe_that_replaces_a_link_is_seen_writing(observe, make_trial) -> None:
    """In the real sandbox a link of the tree is laid out as a link, and a probe replacing it with a file
    holding the target's bytes is a write (modified), like any other."""
    spec, inputs = make_trial(REPLACE_LINK, extra={"real.py": "X = 1\n"})
    os.symlink("real.py", inputs.tree_dir(spec.tree_digest) / "link.py")
    obs = observe(spec, inputs)
    assert obs.exit_code == 0, obs.stderr.data
    assert [(w.path, w.change) for w in obs.writes] == [("/work/link.py", "modified")]
