"""Which work copy the sandbox's containers are asked for, and what overlay mode asks of Docker.

`overlay` (the default): each trial's /work is a copy-on-write layer over a read-only copy of the
tree laid out once per container (worker/box/workdir.py), so a trial costs the same whatever the
tree's size. The supervisor makes its own user and mount namespace for that, which Docker's
default seccomp profile refuses without CAP_SYS_ADMIN: these containers get Docker's default
profile (vendored verbatim in seccomp/, the engine's own version) plus one rule allowing `unshare`,
`mount` and `umount2`. Never seccomp=unconfined. The supervisor then installs a second filter
(worker/box/nsfilter.py) that refuses new namespaces to every probe.

Containers of both modes also get one rule Docker's profile lacks, allowing
`personality(ADDR_NO_RANDOMIZE)`: the supervisor turns address-space layout randomisation off for the
probes of a batch that asks for it (`gate flakes explain`), so copy mode too gets the vendored profile
(plus that rule only) instead of the engine's built-in one.

`copy`: today's fresh copy and full read-back per trial. Forced by PROBEGATE_WORK_COPY=copy (or the
sandbox's `work_copy` option), chosen where this host cannot give overlay mode, and chosen by a
container's supervisor where its dry run fails; either way the observations say which mode ran
and why copy did.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from gate.core.errors import UsageError
from gate.core.suite.trial import WorkCopy
from gate.io.hostsettings import WORK_COPY_ENV

PROFILE = Path(__file__).resolve().parent / "seccomp" / "default.json"
# The one rule added to Docker's profile: what the supervisor needs unprivileged, and nothing else.
SUPERVISOR_RULE = {
    "names": ["mount", "umount2", "unshare"],
    "action": "SCMP_ACT_ALLOW",
    "args": [],
    "comment": "probegate: the supervisor's own user and mount namespace and per-trial overlays",
    "includes": {},
    "excludes": {},
}

# personality(2) with exactly ADDR_NO_RANDOMIZE: Docker allows only a handful of other personas (0, 8,
# 0x20000, 0x20008, and 0xffffffff to read it). A process can only turn off randomisation of what it
# execs later, never of a running process or anything outside its container.
PERSONALITY_RULE = {
    "names": ["personality"],
    "action": "SCMP_ACT_ALLOW",
    "args": [{"index": 0, "value": 0x0040000, "op": "SCMP_CMP_EQ"}],
    "comment": "probegate: ADDR_NO_RANDOMIZE for the probes of a batch that turns ASLR off",
    "includes": {},
    "excludes": {},
}


def wanted(option: str | None = None, setting: str | None = None) -> tuple[WorkCopy, str]:
    """The mode a sandbox asks its containers for: `option` (the sandbox's), else `setting` (what
    PROBEGATE_WORK_COPY said), else overlay; and, for copy, why (the observations carry it). UsageError on
    another word."""
    word = option or setting or WorkCopy.OVERLAY.value
    try:
        mode = WorkCopy(word)
    except ValueError:
        raise UsageError(f"{WORK_COPY_ENV} (or work_copy) is {word!r}; it must be 'overlay' or 'copy'") from None
    if mode is WorkCopy.COPY:
        return mode, "forced by the sandbox's work_copy option" if option else f"forced by {WORK_COPY_ENV}=copy"
    refused = host_refusal()
    return (WorkCopy.COPY, refused) if refused else (mode, "")


def host_refusal(proc: Path = Path("/proc")) -> str | None:
    """Why this host cannot give overlay mode, from its own settings; None when nothing here refuses
    (the supervisor's dry run in the first container still decides)."""
    checks = (
        (proc / "sys/user/max_user_namespaces", "0", "user namespaces are disabled (user.max_user_namespaces=0)"),
        (
            proc / "sys/kernel/unprivileged_userns_clone",
            "0",
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)",
        ),
        (
            proc / "sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)",
        ),
    )
    for path, refusing, why in checks:
        if _read(path) == refusing:
            return why
    filesystems = _read(proc / "filesystems")
    if filesystems is not None and "overlay" not in filesystems.split():
        return "this kernel has no overlayfs"
    return None


def engine_refusal(security_options: list[str]) -> str | None:
    """Why the engine cannot give overlay mode, from its `docker info` SecurityOptions; None when
    nothing there refuses."""
    names = {option.split(",")[0].removeprefix("name=") for option in security_options}
    if "apparmor" in names:
        # Docker confines every container with its docker-default AppArmor profile, which denies mount.
        return "the engine confines containers with AppArmor, whose docker-default profile denies mount"
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None  # absent on this kernel: nothing to refuse


@functools.cache
def seccomp_profile(mode: WorkCopy = WorkCopy.OVERLAY) -> str:
    """Docker's default profile with PERSONALITY_RULE added, and SUPERVISOR_RULE for overlay mode, as
    the JSON `seccomp=` takes."""
    profile = json.loads(PROFILE.read_text())
    profile["syscalls"].append(PERSONALITY_RULE)
    if mode is WorkCopy.OVERLAY:
        profile["syscalls"].append(SUPERVISOR_RULE)
    return json.dumps(profile, separators=(",", ":"))


def security_options(mode: WorkCopy) -> list[str]:
    """The container's security_opt for `mode`: no-new-privileges and the mode's seccomp profile."""
    return ["no-new-privileges", f"seccomp={seccomp_profile(mode)}"]
