"""The real supervisor in both work copy modes without Docker: run as nobody (uid 65534) and PID 1
of its own pid and mount namespace (so its kill(-1) reaches nothing of the host's), over a batch
file naming places in a temporary dir, it reports the same writes in overlay and copy mode, says
which mode ran, and gives its probes no namespace of their own. Needs root, util-linux's unshare and
setpriv, and overlayfs: skipped without them, a failure under CI=true."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import worker.box

pytestmark = pytest.mark.integration

PYTHON = "/usr/bin/python3"  # nobody cannot run a venv's interpreter under root's home
TREE = {"probe.py": None, "data.txt": "orig\n", "pkg/a.py": "A = 1\n", "pkg/b.py": "B = 1\n", "pkg/sub/c.py": "C\n"}
PROBE = """
import ctypes, json, os, pathlib, shutil
first = os.environ["TRIAL"] == "0"
if first:
    pathlib.Path("new.txt").write_text("new")
    pathlib.Path("data.txt").write_text("edited")
    open("pkg/a.py", "a").close()  # a copy-up that changes nothing
    os.chmod("pkg/b.py", os.stat("pkg/b.py").st_mode)  # and another
    shutil.rmtree("pkg/sub")
    pathlib.Path(os.environ["SCRATCH_TMP"], "t").write_text("t")
libc = ctypes.CDLL(None, use_errno=True)
unshare = "done" if libc.unshare(0x10000000 | 0x00020000) == 0 else os.strerror(ctypes.get_errno())
print(json.dumps({"data": pathlib.Path("data.txt").read_text(), "unshare": unshare, "uid": os.getuid()}))
"""


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the supervisor test starts namespaces and mounts: it needs root"
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            return f"util-linux's {tool} is missing"
    if not os.access(PYTHON, os.X_OK):
        return f"{PYTHON} is missing"
    with open("/proc/filesystems") as handle:
        if "overlay" not in handle.read().split():
            return "this kernel has no overlayfs"
    return None


@pytest.fixture
def base():
    """A dir nobody can read holding the box's code, the tree, the input dir and the mount points."""
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="probegate-supervisor-test-"))
    try:
        for source in Path(worker.box.__file__).parent.glob("*.py"):
            shutil.copy(source, root / source.name)
        for rel, text in TREE.items():
            (root / "tree" / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / "tree" / rel).write_text(PROBE if text is None else text)
        for name in ("in", "work", "lower", "scratch", "tmp"):
            (root / name).mkdir()
        (root / "in" / "stdin").write_text("{}")
        for top, _dirs, files in os.walk(root):
            os.chmod(top, 0o755)
            for name in files:
                os.chmod(os.path.join(top, name), 0o644)
        (root / "tmp").chmod(0o1777)
        yield root
    finally:
        shutil.rmtree(root)


def run_supervisor(root: Path, mode: str, trials: int = 2, code: int = 0, *, timings: bool = False) -> list[dict]:
    """One batch of `trials` trials through the real supervisor asked for `mode` (and for the step split
    with `timings`, off as in the host's batch by default); its report lines (it must exit `code`)."""
    work, tmp = f"{root}/work", f"{root}/tmp"
    batch = {
        "writable_roots": [work, tmp],
        "work": work,
        "work_mb": 16,
        "lower": f"{root}/lower",
        "scratch": f"{root}/scratch",
        "src": f"{root}/tree",
        "timings": timings,
        "trials": [
            {
                "id": str(i),
                "argv": [PYTHON, "probe.py"],
                "deadline_s": 20,
                "output_cap_bytes": 4096,
                "stdin": f"{root}/in/stdin",
                "env": {"PATH": "/usr/bin:/bin", "TRIAL": str(i), "SCRATCH_TMP": tmp},
                "canary": "",
            }
            for i in range(trials)
        ],
    }
    (root / "in" / "batch-0.json").write_text(json.dumps(batch))
    (root / "in" / "batch-0.json").chmod(0o644)
    # The work dir is a fresh tmpfs, as Docker's is; the supervisor exits 0.5 s after the batch.
    script = (
        f"mount --make-rprivate / && mount -t tmpfs -o size=16m,mode=1777 work {work} && "
        "exec setpriv --reuid 65534 --regid 65534 --clear-groups --no-new-privs "
        f"{PYTHON} -I -S {root}/supervisor.py {root}/in 0.5 {mode}"
    )
    argv = ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "sh", "-c", script]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    (root / "in" / "batch-0.json").unlink()
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_both_modes_report_the_same_writes_and_say_which_ran(base: Path):
    """Overlay and copy mode give equal writes and outputs per trial; the report names the mode and its steps."""
    reports = {mode: run_supervisor(base, mode, timings=True) for mode in ("overlay", "copy")}
    for mode, lines in reports.items():
        assert lines[-1] == {"done": 0}, lines
        assert [line["work_copy"] for line in lines[:-1]] == [mode, mode]
        assert all(line["work_copy_note"] == "" for line in lines[:-1])
        assert {"setup", "layer", "probe", "detect", "reset"} <= set(lines[0]["steps_s"])
    overlay, copy = reports["overlay"][:2], reports["copy"][:2]
    for key in ("writes", "exit_code"):
        assert [t[key] for t in overlay] == [t[key] for t in copy], key
    changes = {(w["path"].split(str(base), 1)[1], w["change"]) for w in overlay[0]["writes"]}
    assert changes == {
        ("/work/new.txt", "created"),
        ("/work/data.txt", "modified"),
        ("/work/pkg/sub", "deleted"),
        ("/work/pkg/sub/c.py", "deleted"),
        ("/tmp/t", "created"),
    }
    assert overlay[1]["writes"] == [] and overlay[1]["exit_code"] == 0


def test_the_step_split_is_reported_only_when_the_batch_asks(base: Path):
    """A batch as the host writes it by default gets reports without `steps_s`; one asking for `timings`
    gets the container's once-costs and each trial's steps."""
    plain = run_supervisor(base, "overlay")
    timed = run_supervisor(base, "overlay", timings=True)
    assert [line["exit_code"] for line in plain[:-1]] == [line["exit_code"] for line in timed[:-1]] == [0, 0]
    assert not any("steps_s" in line for line in plain)
    once = {"clock", "tree", "setup"}
    assert all(once | {"layer", "probe", "detect", "reset"} <= set(line["steps_s"]) for line in timed[:-1]), timed


def test_overlay_mode_refuses_the_probe_a_namespace(base: Path):
    """In overlay mode the supervisor has its own user namespace, and the probe, still nobody, cannot unshare one."""
    [first, _done] = run_supervisor(base, "overlay", trials=1)
    assert first["work_copy"] == "overlay"
    said = json.loads(base64.b64decode(first["stdout"]["data_b64"]))
    assert said == {"data": "edited", "unshare": os.strerror(1), "uid": 65534}


def test_a_tree_larger_than_the_work_dir_fails_as_the_patchs_in_overlay_mode_too(base: Path):
    """A tree over the work dir's size gets no lower layer: the container copies, which fails as the patch's fault."""
    (base / "tree" / "big.bin").write_bytes(b"\0" * (17 << 20))
    (base / "tree" / "big.bin").chmod(0o644)
    [fault] = run_supervisor(base, "overlay", trials=1, code=2)
    assert fault["origin"] == "patch" and "could not be laid out" in fault["error"], fault
