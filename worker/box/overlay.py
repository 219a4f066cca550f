"""Copy-on-write work copies (issue 13, design (a)): the overlay mode of worker/box/workdir.py.

Instead of laying the whole tree out in /work and reading all of it back per trial, the supervisor
lays the tree out once per container as a read-only lower layer, and each trial's /work is a fresh
overlay over it whose writable upper dir sits on a tmpfs of its own. After the trial, only the
entries of the upper dir (and the lower entries they hide) are candidates for a change, and each
candidate is judged the way fsdiff's snapshots judge it, through the merged view: so a file opened
for writing but left unchanged, or chmod'ed to its own mode (both copy it up), is no change, and the
report equals what a full copy and two snapshots would give.

The supervisor runs unprivileged, so it first enters a user and mount namespace of its own
(`enter_user_namespace`; needs a seccomp profile that allows unshare, mount and umount2) and then
closes the door behind it (nsfilter.deny_new_namespaces): a seccomp filter, inherited by every
probe, that refuses new namespaces, so a probe, which execs with no capabilities, can never gain any.

Stdlib-only, mounted read-only beside supervisor.py; the host's tests drive it as root.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

try:  # inside the sandbox: siblings in the same read-only mount
    from fsdiff import Template, diff, signature
    from lowerview import LowerView
    from nsfilter import deny_new_namespaces, namespace_filter
    from steps import Steps
except ImportError:  # imported on the host as worker.box.overlay
    from worker.box.fsdiff import Template, diff, signature
    from worker.box.lowerview import LowerView
    from worker.box.nsfilter import deny_new_namespaces, namespace_filter
    from worker.box.steps import Steps

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MS_SLAVE = 1, 32, 4096, 16384, 1 << 18, 1 << 19
MNT_DETACH = 2
# Overlay's own xattrs: "trusted." when root mounts it, "user." under `userxattr` (unprivileged).
XATTR_PREFIXES = ("trusted.overlay.", "user.overlay.")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    """mount(2) through libc; OSError naming the target on failure (no `mount` binary in the image)."""
    encoded = data.encode() if data is not None else None
    fs = fstype.encode() if fstype is not None else None
    _check(_libc.mount(source.encode(), target.encode(), fs, flags, encoded), f"mount {fstype or source} on {target}")


def umount(target: str, flags: int = 0) -> None:
    """umount2(2) through libc; OSError naming the target on failure."""
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def enter_user_namespace() -> None:
    """Become root-in-name-only: a new user namespace mapping just our own uid and gid (so the probe,
    which keeps that uid, execs without capabilities) and a new mount namespace it owns, a slave of
    the container's, so no mount made here is seen outside it."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
    # An unprivileged gid_map needs setgroups denied first (else a process could drop a group it is
    # denied by). One line each, our own ids only: all an unprivileged process may map.
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    # Slave, not private: the host may show the tree at /src later, by a mount on its side that must
    # reach us (worker/host/treemount.py); nothing mounted here ever goes the other way.
    mount("none", "/", None, MS_REC | MS_SLAVE)


# --- the layers --------------------------------------------------------------------------------


def make_lower(template: Template, at: str, size_mb: int) -> None:
    """Lay the tree out once on a fresh tmpfs at `at` and make it read-only: the lower layer of
    every trial's overlay. A copy of our own, since the lower's files must belong to the probe's uid
    (the host's tree belongs to whoever made it, unmapped in our user namespace)."""
    mount("probegate-lower", at, "tmpfs", 0, f"size={size_mb}m,mode=755")
    try:
        template.copy_to(at)  # hashing nothing: a trial's changes hash what they touch
        mount("none", at, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    except BaseException:
        umount(at, MNT_DETACH)  # a tree that did not fit leaves no half-filled tmpfs behind
        raise


@dataclass
class Layer:
    """One trial's overlay: mounted on `work`, its upper dir held open as `upper_fd` (no path to
    it is left once `prepare` detached the scratch tmpfs)."""

    work: str
    upper_fd: int
    userxattr: bool


def prepare(
    lower: str,
    scratch: str,
    work: str,
    *,
    size_mb: int,
    userxattr: bool = True,
    mode: int = 0o1777,
    extra: tuple[str, ...] = (),
) -> Layer:
    """Mount a fresh overlay of `lower` on `work`, its upper and work dirs on a new tmpfs of `size_mb`
    mounted at `scratch` and detached again at once: the overlay keeps it, the probe cannot reach it.
    `mode` is the work root's (the merged root takes the upper root's), as Docker's /work tmpfs has.
    `extra` overlay options, e.g. redirect_dir=on, which only a root mount (userxattr off) accepts."""
    mount("probegate-upper", scratch, "tmpfs", 0, f"size={size_mb}m,mode=700")
    try:
        upper, workdir = f"{scratch}/upper", f"{scratch}/work"
        os.mkdir(upper)
        os.chmod(upper, mode)
        os.mkdir(workdir, 0o700)
        options = ",".join((f"lowerdir={lower},upperdir={upper},workdir={workdir}", *extra))
        options += ",userxattr" if userxattr else ""
        mount("overlay", work, "overlay", 0, options)
        upper_fd = os.open(upper, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    finally:
        umount(scratch, MNT_DETACH)
    return Layer(work, upper_fd, userxattr)


def discard(layer: Layer) -> None:
    """Unmount the trial's overlay; closing the upper dir frees its tmpfs. Every process of the trial
    must be gone (a cwd or open file inside makes the unmount fail EBUSY: then the trial is not over)."""
    try:
        umount(layer.work)
    finally:
        os.close(layer.upper_fd)


def enter() -> str | None:
    """The first half of choosing copy-on-write work copies, at the supervisor's start and before
    harden(): once undumpable, /proc/self/uid_map is root's and cannot be written. Enters our own
    user and mount namespace and installs the namespace filter; None when done, else why not (the
    caller then copies, as today). Once the namespace is entered the filter goes on whatever
    follows; a failure to install it raises (the container must not go on)."""
    try:
        namespace_filter()
    except ValueError as exc:
        return str(exc)
    try:
        enter_user_namespace()
    except OSError as exc:
        return f"no user and mount namespace of our own: {exc}"
    deny_new_namespaces()
    return None


def setup(
    template: Template,
    *,
    lower: str,
    scratch: str,
    work: str,
    lower_mb: int,
    upper_mb: int,
    steps: Steps | None = None,
) -> str | None:
    """The second half, once the tree is bound and before the first trial (after `enter` succeeded):
    lay out the lower and prove the mode by a dry run (one file written through a fresh overlay must
    come back as exactly that change). None when every trial may use `prepare`/`changes`/`discard`,
    else why not (the caller then copies, as today). `steps` gets what "lower" and "dry" cost."""
    steps = steps or Steps()
    started = steps.start()
    try:
        make_lower(template, lower, lower_mb)
    except OSError as exc:
        return f"the lower layer could not be laid out: {exc}"
    steps.stop("lower", started)
    reason = dry_run(lower, scratch, work, upper_mb, template.signatures(work), steps)
    if reason is not None:
        umount(lower, MNT_DETACH)
    return reason


def in_place(src: str, host_says: bool) -> bool:
    """Whether the tree at `src` can be the lower layer itself: the host says it mounted a snapshot
    whose every entry it gave the sandbox's uid (worker/host/treemount.py), and `src` is read-only.
    A copy-up keeps the lower file's owner, which must be mapped in our user namespace, and only our
    own uid is. Only the host can tell: in here an unmapped owner reads as the overflow uid 65534,
    which is nobody's, ours."""
    try:
        return host_says and bool(os.statvfs(src).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def setup_in_place(
    src: str, *, scratch: str, work: str, upper_mb: int, steps: Steps | None = None
) -> tuple[str | None, LowerView]:
    """`setup` for a tree that `in_place` allows: no lower to lay out and no tree to read, since the
    tree is the lower and `before` is read from it on demand (lowerview.py). The dry run also opens
    one tree file for writing, proving its copy-up; (None, before) when every trial may use
    `prepare(src, ...)`, else (why not, before) and the caller lays out a lower as `setup` does."""
    before = LowerView(src, work)
    existing = _first_file(src)
    reason = dry_run(src, scratch, work, upper_mb, before, steps or Steps(), existing=existing and f"{work}/{existing}")
    return reason, before


def dry_run(
    lower: str,
    scratch: str,
    work: str,
    upper_mb: int,
    before: Mapping[str, str],
    steps: Steps,
    *,
    existing: str | None = None,
) -> str | None:
    """Prove the mode: through a fresh overlay, one file created (and `existing`, a tree file, opened
    for writing and left unchanged) must come back as exactly that one created file. None when it
    does, else why not; `steps` gets what it cost as "dry"."""
    started = steps.start()
    probe = os.path.join(work, ".probegate-dry-run")
    try:
        layer = prepare(lower, scratch, work, size_mb=upper_mb)
        try:
            with open(probe, "w") as handle:
                handle.write("x")
            if existing is not None:
                os.close(os.open(existing, os.O_WRONLY | os.O_APPEND))  # a copy-up, no change
            found = changes(layer, before)
        finally:
            discard(layer)
    except OSError as exc:
        return f"an overlay on {work} did not work: {exc}"
    if found != [{"path": probe, "change": "created"}]:
        return f"an overlay's dry run reported {found!r}, not one created file"
    steps.stop("dry", started)
    return None


def _first_file(src: str, limit: int = 64) -> str | None:
    """A regular file of the tree (relative path), in a subdir where there is one (its copy-up copies
    a dir up too), looking at no more than `limit` dirs; None if the tree has no file."""
    found = None
    for count, (top, _dirs, files) in enumerate(os.walk(src)):
        for name in sorted(files):
            path = os.path.join(top, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                found = os.path.relpath(path, src)
                if top != src:
                    return found
                break
        if count >= limit:
            break
    return found


def changes(layer: Layer, before: Mapping[str, str]) -> list[dict]:
    """What the trial created, modified or deleted under `layer.work`, exactly as
    `fsdiff.diff(before, snapshot([work]))` would say it, `before` being the lower's signatures keyed
    by their paths under work, with `below(path)` (fsdiff.Signatures, or lowerview.LowerView for a
    lower used in place). Reads only the upper dir, the merged view of the paths it names, and the
    lower entries it hides."""
    work = layer.work.rstrip("/")
    candidates: set[str] = set()
    for rel, is_dir, special in _upper_entries(layer.upper_fd):
        path = f"{work}/{rel}"
        candidates.add(path)
        was_dir = before.get(path, "").startswith("dir:")
        if was_dir and (special or not is_dir):
            # An opaque or redirected dir, or a whiteout or file over a lower dir: the lower entries
            # below it may be gone, or be shown elsewhere.
            candidates.update(before.below(path))
        if is_dir and special:
            # What a redirected dir (a renamed lower dir, with redirect_dir=on: never under userxattr)
            # shows comes from elsewhere in the lower: only the merged view says what is below it.
            # For an opaque dir this looks again at entries the upper dir already named: cheap.
            candidates.update(_walk(path))
    after: dict[str, str] = {}
    for path in candidates:
        try:
            after[path] = signature(path)
        except (FileNotFoundError, NotADirectoryError):
            continue  # gone, or a parent is no longer a dir
        except OSError:
            after[path] = "vanished"  # as fsdiff.snapshot says of a path it cannot stat
    return diff({p: before[p] for p in candidates if p in before}, after)


def _upper_entries(upper_fd: int):
    """(relative path, is a dir?, an opaque or redirected dir?) for every entry of the upper dir."""
    # Errors raise (fwalk would skip what it cannot open): a dir of changes we could not read must
    # fail the read-back, never pass as unchanged.
    for top, dirs, files, top_fd in os.fwalk(".", dir_fd=upper_fd, onerror=_raise):
        for name in dirs + files:
            rel = os.path.normpath(os.path.join(top, name))
            st = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
            # A whiteout (char device 0/0) needs no test of its own: the merged view shows the path
            # gone, and a whiteout or any other non-dir over a lower dir hides what was below it.
            if stat.S_ISDIR(st.st_mode):
                yield rel, True, _opaque_or_redirected(top_fd, name)
            else:
                yield rel, False, False


def _raise(error: OSError) -> None:
    raise error


def _opaque_or_redirected(dir_fd: int, name: str) -> bool:
    # No *xattr call takes a dir_fd; our own /proc/self/fd resolves even when we are not dumpable.
    # A dir whose xattrs cannot be read counts as opaque: a slower walk, never a missed change.
    path = f"/proc/self/fd/{dir_fd}/{name}"
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return True
    # Exact names: a probe's own "user.overlay.*" xattr is stored escaped ("user.overlay.overlay.*").
    return any(f"{prefix}{key}" in names for prefix in XATTR_PREFIXES for key in ("opaque", "redirect"))


def _walk(path: str) -> list[str]:
    found = []
    with contextlib.suppress(OSError):
        for top, dirs, files in os.walk(path, onerror=lambda _err: None):
            found += [os.path.join(top, name) for name in dirs + files]
    return found
