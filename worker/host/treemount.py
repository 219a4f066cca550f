"""Showing a tree to a container that is already started: one read-only bind mount on the host that
reaches the container's /src, instead of a hard link per file (0.6 s for 30,000 files, per container).

Root only: it takes mount(2) on the host. Before the container is created, its /src dir is made a
shared mount of its own (`make_shared`), and Docker binds it with rslave propagation, so a mount
made there later reaches the container, and the supervisor's own mount namespace (a slave of the
container's, worker/box/overlay.py), while no mount made inside comes back. `show` gives a tree
read-only from its first instant as the container sees it: the bind is made and made read-only at a
private staging dir first, then bound onto /src (a remount does not propagate, so a bind made
writable there and remounted read-only after would stay writable inside).

Elsewhere, or with PROBEGATE_TREE_MOUNT=off, trees are hard-linked in as before (warm.fill_tree).

Leak accounting: the dirs holding these mounts are named for the process that made them
(`probegate-batch-<pid>-…`, see `dir_prefix`). `release` undoes every mount on a dir before it is
removed; `sweep_mounts` releases and removes those of dead processes (the dead-process sweep of
`gate run`, `gate-worker` and `gate sweep` calls it).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from gate.core.errors import SandboxError
from worker.box.overlay import MNT_DETACH, MS_BIND, MS_PRIVATE, MS_RDONLY, MS_REMOUNT, mount, umount

MS_NOSUID, MS_NODEV, MS_SHARED = 2, 4, 1 << 20
PREFIX = "probegate-batch-"
_OURS = re.compile(rf"/{PREFIX}(\d+)-[^/]+/(src|stage)$")
MOUNTINFO = Path("/proc/self/mountinfo")


def dir_prefix() -> str:
    """The name prefix of a container's host dir: it says which process made (and must remove) it."""
    return f"{PREFIX}{os.getpid()}-"


def enabled() -> bool:
    """Whether this process can show trees by mounts (root on Linux); PROBEGATE_TREE_MOUNT=off is the
    sandbox's to heed (HostSettings.tree_mount)."""
    return sys.platform == "linux" and os.geteuid() == 0


def make_shared(src_dir: Path) -> bool:
    """Make `src_dir` a shared mount of its own, for a container bound to it with rslave propagation;
    False (nothing left mounted) where this process cannot, and the tree is then linked in."""
    if not enabled():
        return False
    try:
        mount(str(src_dir), str(src_dir), None, MS_BIND)
        mount("none", str(src_dir), None, MS_SHARED)
    except OSError:
        release(src_dir)
        return False
    return True


def is_shared(src_dir: Path) -> bool:
    """Whether `src_dir` is a shared mount point of its own (as `make_shared` leaves it)."""
    return any(point == str(src_dir) and "shared:" in fields for point, fields in _mounts())


def show(tree: Path, src_dir: Path, stage: Path) -> None:
    """Bind `tree` read-only onto the shared `src_dir` (through `stage`, an empty dir of ours);
    SandboxError when it could not be done read-only (nothing is left mounted then)."""
    stage_at, src_at = str(stage), str(src_dir)
    try:
        # The staging dir private first: on a host whose / is shared, even its brief writable bind
        # would reach every peer namespace of /.
        mount(stage_at, stage_at, None, MS_BIND)
        mount("none", stage_at, None, MS_PRIVATE)
        mount(str(tree), stage_at, None, MS_BIND)
        mount("none", stage_at, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        mount(stage_at, src_at, None, MS_BIND)
    except OSError as exc:
        release(src_dir, keep_shared=True)
        raise SandboxError(f"could not mount the tree on {src_dir}: {exc}") from exc
    finally:
        release(stage)
    if not os.statvfs(src_at).f_flag & os.ST_RDONLY:
        release(src_dir, keep_shared=True)
        raise SandboxError(f"the tree mounted on {src_dir} is not read-only")


def release(path: Path, *, keep_shared: bool = False) -> None:
    """Undo every mount on `path` (the shared one too unless `keep_shared`); errors are ignored,
    since another process (the pool, the run) may be releasing the same dir."""
    count = sum(point == str(path) for point, _ in _mounts())
    for _ in range(count - 1 if keep_shared else count):
        with contextlib.suppress(OSError):
            umount(str(path), MNT_DETACH)


def remove_dir(root: Path) -> None:
    """Release the mounts of a container's host dir, then remove it (never through a mounted tree)."""
    for name in ("src", "stage"):
        release(root / name)
    if any(point.startswith(f"{root}/") for point, _ in _mounts()):
        return  # something is still mounted below: removing would reach into it
    shutil.rmtree(root, ignore_errors=True)


def sweep_mounts(alive: Callable[[int], bool]) -> int:
    """Release and remove the container dirs whose process is not `alive`; how many dirs."""
    dead = set()
    for point, _ in _mounts():
        found = _OURS.search(point)
        if found and not alive(int(found.group(1))):
            dead.add(Path(point).parent)
    for root in dead:
        remove_dir(root)
    return len(dead)


def _mounts() -> list[tuple[str, str]]:
    """(mount point, optional fields) of every mount this process sees."""
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 6:
            # Field 5 is the mount point, octal-escaped; optional fields run from 7 to the "-".
            end = fields.index("-") if "-" in fields else len(fields)
            found.append((_unescape(fields[4]), " ".join(fields[6:end])))
    return found


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
