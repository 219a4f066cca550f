"""Hostile probes against overlay work copies on the real engine (issue 13): the supervisor's own
namespace and mounts give the probe no new power, and what a trial wrote reads the same as in copy
mode wherever the semantics say so. Each probe runs in both modes, one sandbox each; no container
of the run is left."""

from __future__ import annotations

import json

import pytest
from conftest import check_mode

from gate.core.suite.trial import Observation, WorkCopy
from gate.io.hostsettings import WORK_COPY_ENV, HostSettings
from worker.host import container as container_module
from worker.host.sandboxes.docker import DockerSandbox

pytestmark = pytest.mark.integration

TREE = {"data.txt": "orig\n", "pkg/a.py": "A = 1\n", "pkg/b.py": "B = 1\n", "pkg/sub/c.py": "C = 1\n"}


@pytest.fixture(autouse=True)
def _no_leftovers(leftovers):
    yield
    assert leftovers() == [], "a container of this test's run remains"


# "overlay": the tree mounted on the host and used in place as the lower (worker/host/treemount.py);
# "overlay+links": the tree hard-linked in and copied to a lower of the supervisor's (not root, or
# PROBEGATE_TREE_MOUNT=off); "copy": a fresh copy per trial.
VARIANTS = {"overlay": ("overlay", ""), "overlay+links": ("overlay", "off"), "copy": ("copy", "")}


@pytest.fixture
def both(docker_client, sandbox_image, make_trial, monkeypatch):
    """Run a probe over TREE once per variant; {variant: observations}."""

    def run(probe: str, *, trials: int = 1) -> dict[str, list[Observation]]:
        first, inputs = make_trial(probe, extra=TREE, deadline_s=5)
        specs = [first] + [first.model_copy(update={"trial_index": i}) for i in range(1, trials)]
        found = {}
        for variant, (mode, tree_mount) in VARIANTS.items():
            host = HostSettings.from_env({"PROBEGATE_TREE_MOUNT": tree_mount})
            sandbox = DockerSandbox(client=docker_client, worker_id="pytest", work_copy=mode, host=host)
            observed = sandbox.run_batch(specs, inputs)
            for obs in observed:
                assert obs.fault is None, obs.fault
                check_mode(obs, mode)
            found[variant] = observed
        return found

    return run


def said(obs: Observation) -> dict:
    return json.loads(obs.stdout.data.decode().strip().splitlines()[-1])


def writes(obs: Observation) -> list[tuple[str, str]]:
    return [(w.path, w.change.value) for w in obs.writes]


ESCAPES = """
    import ctypes, errno, json, os
    libc = ctypes.CDLL(None, use_errno=True)
    MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096

    def call(fn, *args):
        return "ok" if fn(*args) == 0 else errno.errorcode[ctypes.get_errno()]

    def py(action):
        try:
            action()
            return "ok"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    own = lambda kind: os.open(f"/proc/self/ns/{kind}", os.O_RDONLY)
    print(json.dumps({
        "unshare user": py(lambda: os.unshare(os.CLONE_NEWUSER)),
        "unshare mount": py(lambda: os.unshare(os.CLONE_NEWNS)),
        "unshare user+mount": py(lambda: os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)),
        "setns mount": py(lambda: os.setns(own("mnt"), os.CLONE_NEWNS)),
        "setns user": py(lambda: os.setns(own("user"), os.CLONE_NEWUSER)),
        "clone3": call(libc.syscall, 435, None, 0),
        "fsopen tmpfs": call(libc.syscall, 430, b"tmpfs", 0),
        "mount tmpfs on /work": call(libc.mount, b"none", b"/work", b"tmpfs", 0, None),
        "umount /work": call(libc.umount2, b"/work", 0),
        "umount /work lazily": call(libc.umount2, b"/work", 2),
        "remount the lower rw": call(libc.mount, b"none", b"/opt/probegate/lower", None, MS_REMOUNT | MS_BIND, None),
        "umount the lower": call(libc.umount2, b"/opt/probegate/lower", 2),
        "append to the lower": py(lambda: open("/opt/probegate/lower/data.txt", "a").close()),
        "create in the lower": py(lambda: open("/opt/probegate/lower/new.txt", "w").close()),
        "chmod in the lower": py(lambda: os.chmod("/opt/probegate/lower/data.txt", 0o777)),
        "scratch holds": sorted(os.listdir("/opt/probegate/scratch")),
        # The tree at /src, which overlay mode may use in place as its lower.
        "remount /src rw": call(libc.mount, b"none", b"/src", None, MS_REMOUNT | MS_BIND, None),
        "umount /src": call(libc.umount2, b"/src", 2),
        "bind /work over /src": call(libc.mount, b"/work", b"/src", None, MS_BIND, None),
        "append to the tree": py(lambda: open("/src/data.txt", "a").close()),
        "create in the tree": py(lambda: open("/src/new.txt", "w").close()),
        "chmod in the tree": py(lambda: os.chmod("/src/data.txt", 0o777)),
        "unlink in the tree": py(lambda: os.unlink("/src/pkg/a.py")),
        "rename in the tree": py(lambda: os.rename("/src/pkg", "/src/moved")),
        "lower is a mount": any(line.split()[4] == "/opt/probegate/lower" for line in open("/proc/self/mountinfo")),
    }))
    open("marker", "w").write("x")
"""


def test_a_probe_can_neither_unshare_nor_mount_nor_reach_the_layers(both):
    """unshare, setns, clone3, the new mount API, mounting over or unmounting /work or /src, remounting
    or writing the lower or the tree (the lower itself when used in place) all fail in every variant,
    the upper's scratch is empty, and only the probe's own write shows."""
    found = both(ESCAPES)
    for mode, (obs,) in found.items():
        result = said(obs)
        assert result.pop("scratch holds") == [], mode
        assert result.pop("clone3") == "ENOSYS", mode
        # Only the supervisor's own copy of the tree is a lower it mounted; the tree in place is none.
        assert result.pop("lower is a mount") is (mode == "overlay+links"), mode
        writes_to_lower = {k: result.pop(k) for k in list(result) if k.endswith("the lower") and "mount" not in k}
        # Where the lower is no mount, it is an empty read-only dir: a chmod finds nothing to change.
        refused = {"EROFS"} if mode == "overlay+links" else {"EROFS", "ENOENT"}
        assert set(writes_to_lower.values()) <= refused, (mode, writes_to_lower)
        writes_to_tree = {k: result.pop(k) for k in list(result) if k.endswith("the tree")}
        assert set(writes_to_tree.values()) == {"EROFS"}, (mode, writes_to_tree)
        assert set(result.values()) == {"EPERM"}, (mode, result)
        assert writes(obs) == [("/work/marker", "created")], mode


HIDE = """
    import ctypes, errno, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    # Try to write where the supervisor cannot see: our own mount namespace with a tmpfs over /work.
    try:
        os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)
        libc.mount(b"none", b"/work", b"tmpfs", 0, None)
        os.chdir("/work")
        hidden = "hidden"
    except OSError as exc:
        hidden = errno.errorcode[exc.errno]
    open("/work/data.txt", "w").write("changed")
    print(hidden)
"""


def test_a_probe_cannot_hide_its_writes_in_a_namespace_of_its_own(both):
    """A probe that tries to unshare and mount a tmpfs over /work is refused, and its write is reported."""
    for mode, (obs,) in both(HIDE).items():
        assert obs.stdout.data == b"EPERM\n", mode
        assert writes(obs) == [("/work/data.txt", "modified")], mode


UNCHANGED = """
    import os
    open("data.txt", "a").close()
    with open("pkg/a.py", "r+") as handle:
        same = handle.read()
        handle.seek(0)
        handle.write(same)
    os.chmod("pkg/b.py", os.stat("pkg/b.py").st_mode)
    os.chmod("pkg", os.stat("pkg").st_mode)
    print("touched")
"""


def test_open_for_write_without_change_and_chmod_to_the_same_mode_are_no_writes(both):
    """Opening tree files for writing without changing them, or chmod to their own mode, is no write in either mode."""
    for mode, (obs,) in both(UNCHANGED).items():
        assert obs.stdout.data == b"touched\n" and obs.writes == (), (mode, obs.writes)


RENAME = """
    import errno, os, shutil
    try:
        os.rename("pkg", "moved")
        print("renamed")
    except OSError as exc:
        print(errno.errorcode[exc.errno])
        shutil.move("pkg", "moved")
    os.rename("data.txt", "data2.txt")
"""


def test_renaming_a_tree_directory_fails_exdev_in_overlay_mode_yet_reads_as_in_copy_mode(both):
    """os.rename of a tree dir fails EXDEV over an overlay (shutil.move copies instead); writes equal copy mode's."""
    found = both(RENAME)
    (overlay,), (linked,), (copy,) = found["overlay"], found["overlay+links"], found["copy"]
    assert (overlay.stdout.data, linked.stdout.data, copy.stdout.data) == (b"EXDEV\n", b"EXDEV\n", b"renamed\n")
    assert writes(overlay) == writes(linked) == writes(copy)
    assert ("/work/moved/sub/c.py", "created") in writes(overlay) and ("/work/pkg", "deleted") in writes(overlay)


MIXED = """
    import os, shutil, pathlib
    if os.environ["PROBEGATE_TRIAL_INDEX"] == "0":
        pathlib.Path("new.txt").write_text("new")
        pathlib.Path("data.txt").write_text("edited")
        os.chmod("pkg/a.py", 0o600)
        shutil.rmtree("pkg/sub")
        os.mkdir("out")
        pathlib.Path("out/result.json").write_text("{}")
        pathlib.Path("/tmp/scratch").write_text("t")
    print(sorted(os.listdir(".")), pathlib.Path("data.txt").read_text().strip(), os.stat(".").st_uid)
"""


def test_writes_read_the_same_in_both_modes_and_the_next_trial_sees_the_tree(both):
    """Creations, edits, a chmod and a removed dir read the same in both modes; trial 1 sees the tree as it was."""
    found = both(MIXED, trials=2)
    (overlay, overlay_next), (copy, copy_next) = found["overlay"], found["copy"]
    assert writes(overlay) == writes(found["overlay+links"][0]) == writes(copy)
    assert found["overlay+links"][1].stdout.data == overlay_next.stdout.data
    assert ("/work/pkg/sub/c.py", "deleted") in writes(overlay) and ("/tmp/scratch", "created") in writes(overlay)
    assert overlay_next.writes == copy_next.writes == ()
    listing = "['data.txt', 'pkg', 'probe.py'] orig"
    # The work dir's owner is the one difference: nobody's overlay, root's tmpfs.
    assert overlay_next.stdout.data.decode() == f"{listing} 65534\n"
    assert copy_next.stdout.data.decode() == f"{listing} 0\n"


def test_the_forced_fallback_copies_and_says_why(sandbox_image, docker_client, make_trial, monkeypatch):
    """PROBEGATE_WORK_COPY=copy makes the default sandbox copy, and each observation says it was forced."""
    host = HostSettings.from_env({WORK_COPY_ENV: "copy"})
    spec, inputs = make_trial("print('hi')\n")
    [obs] = DockerSandbox(client=docker_client, worker_id="pytest", host=host).run_batch([spec], inputs)
    assert obs.fault is None and obs.work_copy is WorkCopy.COPY
    assert obs.work_copy_note == f"forced by {WORK_COPY_ENV}=copy"


def test_a_container_without_the_profile_falls_back_to_copy_before_its_first_trial(
    sandbox_image, docker_client, make_trial, monkeypatch
):
    """Asked for overlay under Docker's default seccomp profile the supervisor cannot unshare: it copies, saying why."""
    monkeypatch.setattr(container_module, "security_options", lambda mode: ["no-new-privileges"])
    first, inputs = make_trial("import os\nprint(os.stat('.').st_uid)\n", extra=TREE)
    specs = [first, first.model_copy(update={"trial_index": 1})]
    observed = DockerSandbox(client=docker_client, worker_id="pytest", work_copy="overlay").run_batch(specs, inputs)
    for obs in observed:
        assert obs.fault is None and obs.work_copy is WorkCopy.COPY and obs.stdout.data == b"0\n"
        assert obs.work_copy_note.startswith("no user and mount namespace of our own"), obs.work_copy_note
