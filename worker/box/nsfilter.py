"""The second seccomp filter of copy-on-write work copies (issue 13, design (a)): once the supervisor
has its own user and mount namespace, this filter (inherited across fork and exec by every probe)
refuses new namespaces, so a probe, which execs with no capabilities, can never gain any; nor can
it unshare a mount namespace of its own to hide writes (a tmpfs over /work seen only by itself).

Docker's seccomp profile for these containers allows unshare, mount and umount2 to anyone (the
supervisor needs them unprivileged): this filter is what takes unshare back from the probe. mount
and umount2 fail for the probe anyway, since it holds no capability in any namespace.

Stdlib-only, mounted read-only beside supervisor.py.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64 = 0xC000003E, 0xC00000B7
_SYSCALLS = {  # the numbers differ per architecture; clone3 and the new mount API are shared
    AUDIT_ARCH_X86_64: {"unshare": 272, "setns": 308, "clone": 56, "pivot_root": 155},
    AUDIT_ARCH_AARCH64: {"unshare": 97, "setns": 268, "clone": 220, "pivot_root": 41},
}
_ARCHES = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64, "arm64": AUDIT_ARCH_AARCH64}
CLONE3 = 435
NEW_MOUNT_API = (428, 429, 430, 431, 432, 433, 442)  # open_tree .. fspick, mount_setattr: we use none
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET (Docker's mask)
X32_BIT = 0x40000000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW = 0x7FFF0000
_EPERM, _ENOSYS = 1, 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def _errno(err: int) -> int:
    return 0x00050000 | err  # SECCOMP_RET_ERRNO


def namespace_filter(machine: str | None = None) -> bytes:
    """The classic-BPF program `deny_new_namespaces` installs, as bytes (struct sock_filter[]).

    unshare, setns, pivot_root and the new mount API fail EPERM; clone fails EPERM with any
    namespace flag; clone3 fails ENOSYS, since its flags sit in memory seccomp cannot read and libc
    then falls back to clone (Docker's default profile does the same). mount and umount2 stay: the
    supervisor needs them per trial, and without capabilities they fail anyway. Syscalls of another
    ABI (x32, i386 via int 0x80) get ENOSYS, since their numbers differ. ValueError on an
    architecture this does not know, so the caller falls back to copying."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        raise ValueError(f"no seccomp filter for architecture {machine or platform.machine()}")
    nr = _SYSCALLS[arch]
    prog: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, _errno(_ENOSYS)),
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == AUDIT_ARCH_X86_64:
        prog += [(_JGE_K, 0, 1, X32_BIT), (_RET_K, 0, 0, _errno(_ENOSYS))]
    for number in (nr["unshare"], nr["setns"], nr["pivot_root"], *NEW_MOUNT_API):
        prog += [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, _errno(_EPERM))]
    prog += [
        (_JEQ_K, 0, 1, CLONE3),
        (_RET_K, 0, 0, _errno(_ENOSYS)),
        (_JEQ_K, 0, 3, nr["clone"]),
        (_LD_W_ABS, 0, 0, 16),  # the low half of args[0] (little-endian): clone's flags on both arches
        (_JSET_K, 0, 1, NAMESPACE_FLAGS),
        (_RET_K, 0, 0, _errno(_EPERM)),
        (_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def deny_new_namespaces() -> None:
    """Install `namespace_filter` on this process for good (inherited across fork and exec).
    Needs no_new_privs (Docker's no-new-privileges sets it) or CAP_SYS_ADMIN."""
    program = namespace_filter()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "prctl(PR_SET_SECCOMP)")
