"""Copy-on-write work copies (worker/box/overlay.py) on real overlay mounts: whatever a probe does to
its work dir, the changes read from the overlay's upper dir are the ones a full copy and two
snapshots report today. Each scenario runs twice in a child process of its own, in a private mount
namespace (so a crash leaves no mount on the host): once in copy mode, once in an overlay, both at
the same path. Needs root and overlayfs: skipped without them, a failure under CI=true."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from worker.box import nsfilter

pytestmark = pytest.mark.integration

# The child: copy mode first (lay out, run the actions, snapshot, diff), then the overlay over a
# read-only lower at the same path (prepare, run the actions, changes, discard).
RUNNER = r"""
import ctypes, json, os, stat, subprocess, sys
from worker.box import overlay
from worker.box.fsdiff import Template, diff, snapshot
from worker.box.lowerview import LowerView
tree, base, variant, actions = sys.argv[1:5]
userxattr = variant in ("userxattr", "in_place")
extra = ("redirect_dir=on",) if variant == "redirect_dir" else ()
libc = ctypes.CDLL(None, use_errno=True)
overlay._check(libc.unshare(overlay.CLONE_NEWNS), "unshare(CLONE_NEWNS)")
overlay.mount("none", "/", None, overlay.MS_REC | overlay.MS_PRIVATE)
work, lower, scratch = f"{base}/work", f"{base}/lower", f"{base}/scratch"
for path in (work, lower, scratch):
    os.mkdir(path)
template = Template(tree)

def act():
    done = subprocess.run([sys.executable, "-c", actions], cwd=work, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return done.stdout.strip()

overlay.mount("copy", work, "tmpfs", 0, "size=16m,mode=1777")
laid_out = template.lay_out(work)
copy_said = act()
copied = diff(laid_out, snapshot([work]))
overlay.umount(work)

if variant == "in_place":
    # The tree itself as the lower, read-only, its signatures read on demand (as the box does).
    overlay.mount(tree, lower, None, overlay.MS_BIND)
    overlay.mount("none", lower, None, overlay.MS_REMOUNT | overlay.MS_BIND | overlay.MS_RDONLY)
    before = LowerView(lower, work)
else:
    overlay.make_lower(template, lower, 16)
    before = template.signatures(work)
layer = overlay.prepare(lower, scratch, work, size_mb=16, userxattr=userxattr, extra=extra)
said = act()
found = overlay.changes(layer, before)
upper = {}
for top, dirs, files, fd in os.fwalk(".", dir_fd=layer.upper_fd):
    for name in dirs + files:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        kind = "whiteout" if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0 else stat.filemode(st.st_mode)[0]
        xattrs = sorted(os.listxattr(f"/proc/self/fd/{fd}/{name}", follow_symlinks=False))
        upper[os.path.normpath(os.path.join(top, name))] = [kind, xattrs]
lower_intact = diff(template.signatures(lower), snapshot([lower])) == []
overlay.discard(layer)
print(json.dumps({"copy": copied, "overlay": found, "copy_said": copy_said, "said": said,
                  "upper": upper, "lower_intact": lower_intact, "variant": variant}))
"""

TREE = {
    "probe.py": "print('probe')\n",
    "data.txt": "orig\n",
    "pkg/a.py": "A = 1\n",
    "pkg/b.py": "B = 1\n",
    "pkg/sub/c.py": "C = 1\n",
    "other/d.py": "D = 1\n",
}


def _overlay_unavailable() -> str | None:
    if sys.platform != "linux":
        return "overlay work copies need Linux"
    if os.geteuid() != 0:
        return "overlay tests mount filesystems: they need root"
    with open("/proc/filesystems") as handle:
        if "overlay" not in handle.read().split():
            return "this kernel has no overlayfs"
    return None


@pytest.fixture(scope="module")
def overlay_host() -> None:
    """Skip without root and overlayfs, fail under CI=true (CI must prove the work copies)."""
    reason = _overlay_unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)


@pytest.fixture(params=["trusted", "userxattr", "redirect_dir", "in_place"])
def scenario(request, overlay_host, tmp_path: Path):
    """Run action source in copy mode and in an overlay (root's; `userxattr` as in the box; root's with
    redirect_dir=on, where a tree dir can be renamed; the tree itself as the lower, as the box uses a
    tree the host mounted); the child's JSON. The tree also holds a symlink to a dir outside it."""

    def run(actions: str) -> dict:
        tree = tmp_path / "tree"
        for rel, text in TREE.items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text)
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "x.txt").write_text("outside the tree\n")
        (tree / "outside").symlink_to(tmp_path / "elsewhere")
        base = tmp_path / "base"
        base.mkdir()
        argv = [sys.executable, "-c", RUNNER, str(tree), str(base), request.param]
        done = subprocess.run([*argv, textwrap.dedent(actions)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return run


def paths(changes: list[dict]) -> list[tuple[str, str]]:
    """(path below the work dir, change) pairs, for readable expectations."""
    return [(c["path"].rsplit("/work/", 1)[1], c["change"]) for c in changes]


def test_unchanged_copy_up_is_no_change(scenario):
    """A file opened for writing but left as it was, and a chmod to its own mode, copy up but change nothing."""
    result = scenario("""
        import os
        open("probe.py", "a").close()
        os.chmod("data.txt", os.stat("data.txt").st_mode)
        with open("pkg/a.py", "r+") as handle:
            same = handle.read()
            handle.seek(0)
            handle.write(same)  # rewritten with the same bytes
    """)
    assert {"probe.py", "data.txt", "pkg/a.py"} <= set(result["upper"])  # the copy-ups happened
    assert result["overlay"] == result["copy"] == []
    assert result["lower_intact"]


def test_created_modified_and_deleted_files_match_copy_mode(scenario):
    """New, edited, re-moded and deleted files are reported exactly as a full copy reports them."""
    result = scenario("""
        import os
        open("new.txt", "w").write("new")
        open("data.txt", "w").write("edited")
        os.chmod("probe.py", 0o600)
        os.unlink("pkg/b.py")
        os.symlink("data.txt", "link")
        os.mkdir("out")
        open("out/result.json", "w").write("{}")
    """)
    assert result["upper"]["pkg/b.py"][0] == "whiteout"
    assert paths(result["overlay"]) == [
        ("data.txt", "modified"),
        ("link", "created"),
        ("new.txt", "created"),
        ("out", "created"),
        ("out/result.json", "created"),
        ("pkg/b.py", "deleted"),
        ("probe.py", "modified"),
    ]
    assert result["overlay"] == result["copy"]
    assert result["lower_intact"]


def test_a_symlinked_dir_replaced_by_a_real_one_reports_created_not_what_the_link_pointed_at(scenario):
    """A file made where a tree symlink to a dir outside once led is created, never the outside file modified."""
    result = scenario("""
        import os
        os.unlink("outside")
        os.mkdir("outside")
        open("outside/x.txt", "w").write("mine")
    """)
    assert paths(result["overlay"]) == [("outside", "modified"), ("outside/x.txt", "created")]
    assert result["overlay"] == result["copy"]
    assert result["lower_intact"]


def test_writing_through_a_tree_symlink_is_not_a_change_of_the_work_dir(scenario):
    """A write that a tree symlink carries out of the work dir is nothing the work dir's changes name."""
    result = scenario("""
        print(open("outside/x.txt").read().strip())
    """)
    assert result["said"] == result["copy_said"] == "outside the tree"
    assert result["overlay"] == result["copy"] == []


def test_a_removed_directory_reports_everything_below_it(scenario):
    """Removing a tree directory leaves one whiteout, yet every file and dir below it is reported deleted."""
    result = scenario("""
        import shutil
        shutil.rmtree("pkg")
    """)
    assert result["upper"]["pkg"][0] == "whiteout"
    assert paths(result["overlay"]) == [
        (p, "deleted") for p in ("pkg", "pkg/a.py", "pkg/b.py", "pkg/sub", "pkg/sub/c.py")
    ]
    assert result["overlay"] == result["copy"]


def test_a_recreated_directory_is_opaque_and_hides_the_old_files(scenario):
    """A directory removed and made again is opaque in the upper dir: old files deleted, new ones created."""
    result = scenario("""
        import os, shutil
        shutil.rmtree("pkg")
        os.mkdir("pkg")
        open("pkg/a.py", "w").write("A = 1\\n")  # same name and bytes as before: unchanged
        open("pkg/z.py", "w").write("Z = 1\\n")
    """)
    kind, xattrs = result["upper"]["pkg"]
    assert kind == "d" and any(x.endswith("overlay.opaque") for x in xattrs), result["upper"]
    assert paths(result["overlay"]) == [
        ("pkg/b.py", "deleted"),
        ("pkg/sub", "deleted"),
        ("pkg/sub/c.py", "deleted"),
        ("pkg/z.py", "created"),
    ]
    assert result["overlay"] == result["copy"]


def test_a_file_and_a_directory_swapping_places_match_copy_mode(scenario):
    """A tree directory replaced by a file, and a tree file replaced by a directory, read as in copy mode."""
    result = scenario("""
        import os, shutil
        shutil.rmtree("other")
        open("other", "w").write("now a file")
        os.unlink("data.txt")
        os.mkdir("data.txt")
        open("data.txt/inside", "w").write("x")
    """)
    assert paths(result["overlay"]) == [
        ("data.txt", "modified"),
        ("data.txt/inside", "created"),
        ("other", "modified"),
        ("other/d.py", "deleted"),
    ]
    assert result["overlay"] == result["copy"]


def test_renaming_a_tree_directory_reports_as_in_copy_mode(scenario):
    """os.rename of a lower directory fails EXDEV without redirect_dir, and shutil.move's copy fallback then
    leaves the changes a rename leaves in copy mode; with redirect_dir=on the rename itself reads the same."""
    result = scenario("""
        import errno, os, shutil
        try:
            os.rename("pkg", "moved")
            print("renamed")
        except OSError as exc:
            print(errno.errorcode[exc.errno])
            shutil.move("pkg", "moved")
        os.rename("data.txt", "data2.txt")  # a file renames fine: it is copied up first
    """)
    renamed = "renamed" if result["variant"] == "redirect_dir" else "EXDEV"
    assert (result["copy_said"], result["said"]) == ("renamed", renamed)
    if result["variant"] == "redirect_dir":
        assert any(x.endswith("overlay.redirect") for x in result["upper"]["moved"][1]), result["upper"]
    assert result["overlay"] == result["copy"]
    assert ("moved/sub/c.py", "created") in paths(result["overlay"])
    assert ("data.txt", "deleted") in paths(result["overlay"])


def test_a_probes_own_overlay_xattr_is_escaped_and_hides_nothing(scenario):
    """An overlay-named xattr set through the work dir is stored escaped: the dir is not opaque, nothing is hidden."""
    result = scenario("""
        import os
        for prefix in ("trusted", "user"):
            try:
                os.setxattr("pkg", f"{prefix}.overlay.opaque", b"y")
            except OSError:
                pass
        print(sorted(os.listdir("pkg")))
    """)
    assert result["said"] == result["copy_said"] == "['a.py', 'b.py', 'sub']"
    assert result["overlay"] == result["copy"] == []


def test_changes_reads_only_the_upper_dir_for_a_large_tree(overlay_host, tmp_path: Path):
    """With 3,000 tree files and one write, changes() looks at a handful of paths, not the tree."""
    tree = tmp_path / "tree"
    for i in range(3000):
        (tree / f"pkg{i % 10}").mkdir(parents=True, exist_ok=True)
        (tree / f"pkg{i % 10}" / f"mod{i}.py").write_text("VALUE = 1\n" * 120)
    base = tmp_path / "base"
    base.mkdir()
    runner = RUNNER.replace(
        "found = overlay.changes(", "import time; t0 = time.perf_counter(); found = overlay.changes("
    )
    runner = runner.replace("upper = {}", "took = time.perf_counter() - t0\nupper = {}")
    runner = runner.replace('"variant": variant}', '"variant": variant, "took": took}')
    actions = "open('pkg3/mod3.py', 'a').write('X = 2\\n')"
    done = subprocess.run(
        [sys.executable, "-c", runner, str(tree), str(base), "userxattr", actions],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert paths(result["overlay"]) == [("pkg3/mod3.py", "modified")] and result["overlay"] == result["copy"]
    assert result["took"] < 0.05, result["took"]  # a full read-back of 3,000 files takes ~100 ms here


def test_discard_refuses_while_a_process_still_holds_the_work_dir(overlay_host, tmp_path: Path):
    """An overlay a live process still uses is not discarded (EBUSY): the trial's processes must die first."""
    script = r"""
import ctypes, errno, os, subprocess, sys
from worker.box import overlay
from worker.box.fsdiff import Template
libc = ctypes.CDLL(None, use_errno=True)
overlay._check(libc.unshare(overlay.CLONE_NEWNS), "unshare")
overlay.mount("none", "/", None, overlay.MS_REC | overlay.MS_PRIVATE)
base = sys.argv[1]
for name in ("tree", "work", "lower", "scratch"):
    os.mkdir(f"{base}/{name}")
open(f"{base}/tree/f", "w").write("x")
overlay.make_lower(Template(f"{base}/tree"), f"{base}/lower", 4)
layer = overlay.prepare(f"{base}/lower", f"{base}/scratch", f"{base}/work", size_mb=4)
holder = subprocess.Popen(["sleep", "30"], cwd=f"{base}/work")
try:
    overlay.discard(layer)
    print("discarded")
except OSError as exc:
    print(errno.errorcode[exc.errno])
holder.kill()
holder.wait()
layer.upper_fd = os.open("/", os.O_RDONLY)  # discard closed the first one
overlay.discard(layer)
print("then discarded")
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["EBUSY", "then discarded"]


NAMESPACE_ATTEMPTS = r"""
import ctypes, json, os, subprocess, sys
from worker.box import nsfilter, overlay
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, *args):
    return "ok" if getattr(libc, name)(*args) == 0 else os.strerror(ctypes.get_errno())
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as Docker's no-new-privileges sets it
nsfilter.deny_new_namespaces()
out = {
    "unshare user": attempt("unshare", overlay.CLONE_NEWUSER),
    "unshare mount": attempt("unshare", overlay.CLONE_NEWNS),
    "setns": attempt("setns", os.open("/proc/self/ns/mnt", os.O_RDONLY), 0),
}
child = subprocess.run([sys.executable, "-c",
    "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
    "print(libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))"], capture_output=True, text=True)
out["child unshare"] = child.stdout.strip()
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(out))
"""


def test_the_namespace_filter_refuses_new_namespaces_to_us_and_our_children():
    """After deny_new_namespaces, unshare and setns fail EPERM here and in an exec'd child; fork and exec still work."""
    if sys.platform != "linux":
        pytest.skip("seccomp is Linux's")
    try:
        nsfilter.namespace_filter()
    except ValueError as exc:
        pytest.skip(str(exc))
    done = subprocess.run([sys.executable, "-c", NAMESPACE_ATTEMPTS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    eperm = os.strerror(errno.EPERM)
    assert json.loads(done.stdout) == {
        "unshare user": eperm,
        "unshare mount": eperm,
        "setns": eperm,
        "child unshare": f"-1 {eperm}",
        "fork": 7,
    }


# The supervisor's once-per-container choice, as the box makes it: unprivileged (uid 65534, as in
# the sandbox), so the user namespace maps that uid and nothing else.
SETUP = r"""
import ctypes, json, os, sys
from worker.box import nsfilter, overlay
from worker.box.fsdiff import Template
base, blocked = sys.argv[1], sys.argv[2] == "1"
libc = ctypes.CDLL(None, use_errno=True)
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: a uid change cleared it; the sandbox's supervisor starts as 65534
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as Docker's no-new-privileges sets it
if blocked:
    nsfilter.deny_new_namespaces()  # stands in for a seccomp profile or a kernel that refuses unshare
work = f"{base}/work"
template = Template(f"{base}/tree")
reason = overlay.enter()
libc.prctl(4, 0, 0, 0, 0)  # the supervisor's harden() comes between the two halves
if reason is None:
    places = {"lower": f"{base}/lower", "scratch": f"{base}/scratch", "work": work}
    reason = overlay.setup(template, **places, lower_mb=8, upper_mb=8)
out = {"reason": reason}
if reason is None:
    layer = overlay.prepare(f"{base}/lower", f"{base}/scratch", work, size_mb=8)
    open(f"{work}/pkg/a.py", "a").write("more")
    found = overlay.changes(layer, template.signatures(work))
    out["changes"] = [(c["path"][len(work) + 1 :], c["change"]) for c in found]
    out["work owner"] = os.stat(work).st_uid
    overlay.discard(layer)
    out["unshare after setup"] = "ok" if libc.unshare(overlay.CLONE_NEWUSER) == 0 else os.strerror(ctypes.get_errno())
print(json.dumps(out))
"""


@pytest.fixture
def shared_base(overlay_host):
    """A base dir nobody (65534) can reach, holding a small tree and the three mount points; removed after."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="probegate-overlay-test-"))
    try:
        for rel, text in TREE.items():
            (base / "tree" / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / "tree" / rel).write_text(text)
        for name in ("work", "lower", "scratch"):
            (base / name).mkdir()
        for top, _dirs, files in os.walk(base):
            os.chmod(top, 0o755)
            for name in files:
                os.chmod(os.path.join(top, name), 0o644)
        yield base
    finally:
        shutil.rmtree(base)


def run_setup(base: Path, blocked: bool) -> dict:
    """Run SETUP in a child as nobody; its JSON."""
    argv = [sys.executable, "-c", SETUP, str(base), "1" if blocked else "0"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _userns_refused() -> bool:
    for path in ("/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces"):
        with contextlib.suppress(OSError), open(path) as handle:
            if handle.read().strip() == "0":
                return True
    return False


def test_setup_makes_work_copies_copy_on_write_for_an_unprivileged_supervisor(shared_base: Path):
    """As nobody, enter and setup (undumpable between them) prove an overlay; then writes show and unshare fails."""
    if _userns_refused() and os.environ.get("CI") != "true":
        pytest.skip("this host refuses unprivileged user namespaces (sysctl)")
    result = run_setup(shared_base, blocked=False)
    assert result == {
        "reason": None,
        "changes": [["pkg/a.py", "modified"]],
        "work owner": 65534,
        "unshare after setup": os.strerror(errno.EPERM),
    }


def test_setup_says_why_when_it_cannot_and_leaves_copy_mode_possible(shared_base: Path):
    """Where unshare is refused, enter returns the reason instead of raising, and nothing was mounted."""
    result = run_setup(shared_base, blocked=True)
    assert result["reason"].startswith("no user and mount namespace of our own"), result
    assert os.listdir(shared_base / "lower") == []
