"""A wheelhouse for a project image: the suite's hashed lock file resolved on this host for the
image's Python and platform, binary wheels only, plus the pip wheel the build installs them with.

Why on the host: build containers have no network (the engine runs `--bridge=none`), the image's
Python (3.13) is not the host's, and the image has neither pip nor a compiler. So the host
downloads wheels tagged for the image, hash-checked against the lock, and the build installs them
offline. A dependency that ships only as source cannot be installed there and is refused by name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gate.core.errors import ImageError

# Run in the base image to learn what wheels it can take (no site, nothing of the image's environment).
TARGET_PROBE = (
    "import json, os, platform, sys; print(json.dumps({'python': list(sys.version_info[:2]), "
    "'machine': platform.machine(), 'libc': os.confstr('CS_GNU_LIBC_VERSION')}))"
)
PIP_TIMEOUT_S = 600
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}  # PEP 600's aliases


@dataclass(frozen=True)
class PythonTarget:
    """The interpreter and platform of the image wheels are chosen for."""

    python: tuple[int, int]
    machine: str
    glibc: tuple[int, int]

    @classmethod
    def parse(cls, raw: bytes) -> PythonTarget:
        """From TARGET_PROBE's output; ValueError when it is not that."""
        data = json.loads(raw)
        libc = re.fullmatch(r"glibc (\d+)\.(\d+)", str(data["libc"]))
        if not libc:
            raise ValueError(f"not a glibc image ({data['libc']!r}): manylinux wheels need glibc")
        major, minor = (int(part) for part in data["python"])
        return cls(python=(major, minor), machine=str(data["machine"]), glibc=(int(libc[1]), int(libc[2])))

    @property
    def abi(self) -> str:
        return f"cp{self.python[0]}{self.python[1]}"

    @property
    def site_packages(self) -> str:
        """Where Debian's python3 looks for locally installed packages (already on its sys.path)."""
        return f"/usr/local/lib/python{self.python[0]}.{self.python[1]}/dist-packages"

    def platforms(self) -> list[str]:
        """Every manylinux tag this glibc satisfies, newest first (pure wheels always match too)."""
        tags = []
        for minor in range(self.glibc[1], 4, -1):
            tags.append(f"manylinux_2_{minor}_{self.machine}")
            if minor in _LEGACY:
                tags.append(f"{_LEGACY[minor]}_{self.machine}")
        return tags

    def pip_args(self) -> list[str]:
        args = ["--python-version", f"{self.python[0]}.{self.python[1]}", "--implementation", "cp"]
        for abi in (self.abi, "abi3", "none"):
            args += ["--abi", abi]
        for tag in self.platforms():
            args += ["--platform", tag]
        return args

    def describe(self) -> str:
        return f"{self.abi} manylinux {self.machine} (glibc {self.glibc[0]}.{self.glibc[1]})"


def download(lock: Path, dest: Path, target: PythonTarget, *, label: str) -> list[str]:
    """Fill `dest` with the lock's wheels for `target` and `dest/tools` with pip's; the wheel names."""
    # --isolated: this host's pip configuration (extra indexes, constraints) must not change what the
    # lock resolves to; the lock's hashes decide.
    common = [sys.executable, "-m", "pip", "download", "--isolated", "--disable-pip-version-check", "--quiet"]
    common += ["--only-binary=:all:", *target.pip_args()]
    _pip([*common, "--require-hashes", "-r", str(lock), "-d", str(dest)], label=label, target=target)
    _pip([*common, "--no-deps", "pip", "-d", str(dest / "tools")], label="pip for the image build", target=target)
    return sorted(path.name for path in dest.glob("*.whl"))


def _pip(argv: list[str], *, label: str, target: PythonTarget) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ImageError(f"resolving the wheelhouse took over {PIP_TIMEOUT_S} s", file=label) from None
    if done.returncode != 0:
        raise ImageError(pip_problem(done.stderr, target), file=label)


def pip_problem(stderr: str, target: PythonTarget) -> str:
    """One line for what pip refused: a requirement with no wheel for the image is named."""
    missing = re.search(r"satisfies the requirement (\S+)", stderr)
    if missing:
        return (
            f"{missing[1]} has no wheel for the image's Python ({target.describe()}); a dependency that ships "
            "only as source cannot be installed without network or compiler: pin a version with a wheel"
        )
    if "Hashes are required" in stderr or "must have their versions pinned" in stderr:
        return "pin every requirement with == and --hash=sha256:... (e.g. `pip-compile --generate-hashes`)"
    if "DO NOT MATCH THE HASHES" in stderr:
        found = re.search(r"^\s+(\S+) from ", stderr, re.M)
        return f"a downloaded file does not match the lock's hash{f' ({found[1]})' if found else ''}"
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR:")]
    lines = errors or [line for line in stderr.splitlines() if line.strip()] or ["pip failed"]
    return f"pip could not resolve the lock: {lines[0].removeprefix('ERROR: ')[:300]}"
