"""How a host's sandboxes make containers (worker/host): the work copy mode, a standing pool, tree mounts.
The entry points (`gate`, `gate-worker`) read these once from the environment and hand them to DockerSandbox;
declared here, below both, so that parsing `gate`'s arguments loads nothing of worker/."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.io.envsettings import read, setting

WORK_COPY_ENV = "PROBEGATE_WORK_COPY"
POOL_ENV = "PROBEGATE_POOL"
TREE_MOUNT_ENV = "PROBEGATE_TREE_MOUNT"


def _on_unless_off(text: str) -> bool:
    return text.strip().lower() != "off"


@dataclass(frozen=True)
class HostSettings:
    """The host's sandbox settings; the defaults are a bare environment's."""

    work_copy: str | None = setting(
        WORK_COPY_ENV, "`copy`: force copied work dirs (unset: overlay where the host and engine allow it)"
    )
    pool: str = setting(
        POOL_ENV,
        "a standing pool's socket; `off`: never use one (unset: `gate pool serve`'s default socket when a pool "
        "listens there; `gate-worker --pool` wins)",
        default="",
    )
    tree_mount: bool = setting(
        TREE_MOUNT_ENV,
        "`off`: trees are hard-linked into containers instead of bind-mounted (mounts need a root Linux host)",
        default=True,
        parse=_on_unless_off,
        shown="on",
    )
    runtime_dir: Path | None = setting(
        "XDG_RUNTIME_DIR", "where `gate pool serve`'s default socket lies (unset: /tmp/probegate-UID)", parse=Path
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HostSettings:
        """The settings `env` gives (the entry points read them as part of theirs)."""
        return read(cls, env)
