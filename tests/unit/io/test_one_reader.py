"""Every file a user names is read through `gate.io.inputs.read_input`, the one reader that never
blocks (a FIFO, device or directory is refused, never opened for a blocking read) and turns every OS
failure into one GateError. This test scans `gate/` and `worker/` for any other way of reading a
file: `Path.read_bytes/read_text`, `Path.open(...)`, builtin `open`, `os.open` without O_NONBLOCK
(or a write, directory or read-write open), `json/tomllib/pickle.load`, importlib's file loaders.
Each remaining call is listed below with why it is not a user's file; a new one fails the test until
it goes through read_input or is listed with its reason (and a listed call that is gone fails too).

Out of the scan: `gate/io/inputs.py` (the reader itself), `worker/box/` (runs inside the container
on what the gate laid out) and `gate/cli/scaffold/` (templates `gate init` copies, never run here).
"""

from __future__ import annotations

import ast

from support.paths import ROOT

SKIPPED = ("worker/box/", "gate/cli/scaffold/", "gate/io/inputs.py")
NONBLOCKING = ("O_NONBLOCK", "O_WRONLY", "O_DIRECTORY", "O_RDWR")  # a write or a folder never blocks on a FIFO

ALLOWED: dict[tuple[str, str], str] = {
    ("gate/cli/init.py", "files = {dest: (scaffold / template).read_bytes() for template, dest, _ in TEMPLATES}"):
        "the package's own templates",
    ("gate/cli/init.py", 'with path.open("xb") as handle:'): "creates a new file (O_EXCL), a write",
    ("gate/io/artifacts.py", 'with path.open("ab") as handle:'): "appends the step summary, a write",
    ("gate/io/patchedtree.py", "fd = os.open(name, _FILE_FLAGS, dir_fd=folder)"):
        "_FILE_FLAGS holds O_NONBLOCK and O_NOFOLLOW (the patched tree, read beneath its root)",
    ("gate/io/patchedtree.py", "self._chain.append((part, os.open(part, _DIR_FLAGS, dir_fd=parent)))"):
        "_DIR_FLAGS opens folders only (O_DIRECTORY)",
    ("gate/io/patchedtree.py", 'with open(beneath.open(rel), "rb") as handle:'):
        "wraps a descriptor Beneath.open made non-blocking",
    ("gate/io/patchedtree.py", 'with open(beneath.open(rel), "rb") as source, open(target, "xb") as copy:'):
        "a non-blocking descriptor, and a new file in the gate's own snapshot",
    ("gate/view/app.py", 'text = files("gate.view").joinpath("static", name).read_text(encoding="utf-8")'): (
        "the package's own static files, by a name from a fixed list"
    ),
    ("worker/celery/shared/blobs.py", "data = cached.read_bytes()"): "the worker's own blob cache, checked by digest",
    ("worker/celery/shared/blobs.py", 'with open(beneath.open(rel), "rb") as handle:'):
        "wraps a descriptor Beneath.open made non-blocking",
    ("worker/celery/worker/imagefetch.py", 'with path.open("a") as handle:'): "the worker's own lock file (flock)",
    ("worker/celery/worker/stopping.py", 'fields = stat.read_text().rsplit(")", 1)[1].split()'): "/proc/<pid>/stat",
    ("worker/host/runcontainers.py", "if (opt / name).read_bytes() != source.read_bytes():"):
        "the standing pool's staged copy of our own supervisor code",
    ("worker/host/images.py", 'files[f"wheels/tools/{pip_wheel}"] = (wheels / "tools" / pip_wheel).read_bytes()'):
        "wheels pip just downloaded into the build's private temporary folder",
    ("worker/host/images.py", 'files = {f"wheels/{name}": (wheels / name).read_bytes() for name in names}'):
        "wheels pip just downloaded into the build's private temporary folder",
    ("worker/host/treemount.py", "lines = MOUNTINFO.read_text().splitlines()"): "/proc/self/mountinfo",
    ("worker/host/workcopy.py", "profile = json.loads(PROFILE.read_text())"): "the package's vendored seccomp profile",
    ("worker/host/workcopy.py", "return path.read_text().strip()"): "kernel settings under /proc and /sys",
}  # fmt: skip


def _reading_calls(source: str) -> list[tuple[int, str]]:
    """(line, kind) of every call in `source` that may read a file other than through read_input."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        kind = None
        if isinstance(func, ast.Name) and func.id == "open":
            kind = "open"
        elif isinstance(func, ast.Attribute):
            owner = ast.unparse(func.value)
            if func.attr in ("read_bytes", "read_text"):
                kind = func.attr
            elif func.attr == "open" and owner == "os":
                flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
                kind = None if any(flag in flags for flag in NONBLOCKING) else "os.open"
            elif func.attr == "open" and _opens_a_path(node):
                kind = "Path.open"
            elif func.attr == "load" and owner in ("json", "tomllib", "pickle"):
                kind = f"{owner}.load"
            elif func.attr in ("spec_from_file_location", "run_path", "load_source", "SourceFileLoader"):
                kind = func.attr
        if kind:
            found.append((node.lineno, kind))
    return found


def _opens_a_path(node: ast.Call) -> bool:
    """`x.open()` or `x.open("rb")`: a Path's open (an executor's `open(run_id)` takes a variable)."""
    if not node.args and not node.keywords:
        return True
    first = node.args[0] if node.args else None
    return isinstance(first, ast.Constant) and isinstance(first.value, str)


def scanned() -> dict[tuple[str, str], str]:
    calls: dict[tuple[str, str], str] = {}
    for path in sorted([*ROOT.joinpath("gate").rglob("*.py"), *ROOT.joinpath("worker").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(SKIPPED):
            continue
        source = path.read_text()
        lines = source.splitlines()
        for line, kind in _reading_calls(source):
            calls[(rel, lines[line - 1].strip())] = kind
    return calls


def test_every_file_read_goes_through_read_input_or_is_listed_with_its_reason() -> None:
    calls = scanned()
    unlisted = {key: kind for key, kind in calls.items() if key not in ALLOWED}
    assert not unlisted, (
        "read through gate.io.inputs.read_input (or list with the reason it is no user's file): "
        + "; ".join(f"{file}: {kind}: {line}" for (file, line), kind in unlisted.items())
    )
    stale = [key for key in ALLOWED if key not in calls]
    assert not stale, f"listed but no longer in the code: {stale}"


def test_the_scan_finds_what_it_must() -> None:
    """The scanner itself: each way of reading a file is found, the non-blocking and writing ones are not."""
    sample = """
import json, os, tomllib, importlib.util
Path("x").read_bytes()
p.read_text()
open(p)
p.open("rb")
p.open()
os.open(p, os.O_RDONLY)
json.load(handle)
tomllib.load(handle)
importlib.util.spec_from_file_location("m", p)
os.open(p, os.O_RDONLY | os.O_NONBLOCK)
os.open(p, os.O_WRONLY | os.O_CREAT)
executor.open(run_id)
tarfile.open(fileobj=buffer)
"""
    kinds = [kind for _, kind in _reading_calls(sample)]
    assert kinds == ["read_bytes", "read_text", "open", "Path.open", "Path.open", "os.open", "json.load",
                     "tomllib.load", "spec_from_file_location"]  # fmt: skip
