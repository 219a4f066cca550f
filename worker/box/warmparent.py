"""The warm parent: a Python that pre-imports the image's own modules once, then forks one child per
trial that becomes the probe as a fresh `python3` would have started it.

Run by the supervisor (worker/box/warmclient.py) as `python3 -s -P warmparent.py FD SKIP_FD` with an
environment of its own making, in `/`: no PYTHONPATH, no user site, no script folder, so nothing of
the patched tree is on sys.path while it imports (no module, sitecustomize or .pth of the tree can
run here). SKIP_FD holds the top-level modules the tree shadows: never pre-imported, nor is anything
whose import pulls one in. FD is a SOCK_SEQPACKET socket: per trial the supervisor sends four file
descriptors (the request in a memfd, stdin, stdout, stderr); the parent forks, answers {"pid"}, reaps
the child and answers {"status", "user", "sys", "rss", "fork"}. The request (argv, environment, canary)
is read by the child only, so no trial's secret ever sits in the parent a later child forks from.
Each child forks from this clean parent, never from an earlier child.

Stdlib-only; it imports nothing before its pre-imports but warmplan (which needs only os).
"""

from __future__ import annotations

import os
import sys

BASELINE = frozenset(sys.modules)  # what the bare interpreter loaded before us: a fresh probe has it too
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import warnings  # noqa: E402

import warmplan  # noqa: E402  (after our folder is on sys.path, and before any pre-import)

sys.path.remove(HERE)


def preimport(names: list[str], skip: set[str]) -> tuple[list[str], list[str]]:
    """Import each of `names`; undo one that fails or pulls in a module the tree shadows. Returns
    (imported, refused)."""
    imported, refused = [], []
    for name in names:
        before = set(sys.modules)
        try:
            __import__(name)
            ok = True
        except BaseException:
            ok = False
        added = set(sys.modules) - before
        if ok and not any(warmplan.top(module) in skip for module in added):
            imported.append(name)
            continue
        for module in added:
            sys.modules.pop(module, None)
        refused.append(name)
    return imported, refused


OURS = frozenset(sys.modules) - BASELINE  # warmplan and what it needed: no child keeps them
BASE_PATH = list(sys.path)


def read_skip(fd: int) -> set[str]:
    """The shadowed names, one a line, from the memfd the supervisor passed (a tree may hold more names
    than one command-line argument can carry)."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return {name for name in b"".join(chunks).decode().split("\n") if name}


SKIP = read_skip(int(sys.argv[2]))
with warnings.catch_warnings():  # on leaving, the registries reset: a child's warnings still show
    warnings.simplefilter("ignore")
    IMPORTED, REFUSED = preimport(warmplan.candidates(BASE_PATH, SKIP), SKIP)
# A child keeps only these: the bare interpreter's modules and the pre-imports, never the parent's tools.
WARM = frozenset(sys.modules) - OURS

import atexit  # noqa: E402  (the parent's tools: imported after the snapshot, dropped in each child)
import builtins  # noqa: E402
import contextlib  # noqa: E402
import ctypes  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import mmap  # noqa: E402
import runpy  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from importlib.machinery import SourceFileLoader  # noqa: E402

PR_SET_DUMPABLE = 4
ADDR_NO_RANDOMIZE = 0x0040000  # personality flags, as probeproc.layout sets them
PER_QUERY = 0xFFFFFFFF
SHIELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT)
OWN_FILES = frozenset({__file__, os.path.join(HERE, "warmplan.py"), runpy.__file__})


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def prctl_dumpable(value: int) -> None:
    libc = _libc()
    if libc.prctl(PR_SET_DUMPABLE, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_DUMPABLE, {value}) failed")


def send(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message, separators=(",", ":")).encode())


def read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def stream(fd: int, like: io.TextIOWrapper, mode: str) -> io.TextIOWrapper:
    """A new sys.std* over `fd` made as the interpreter made `like` (encoding, errors, buffering)."""
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors, line_buffering=like.line_buffering)


def run_script(path: str) -> None:
    """Run `path` as a fresh `python3 SCRIPT` does: a new __main__ whose __file__ is the absolute path
    (runpy.run_path would also rewrite sys.argv[0])."""
    with open(path, "rb") as handle:
        source = handle.read()
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=path, __cached__=None, __builtins__=builtins, __loader__=SourceFileLoader("__main__", path)
    )
    sys.modules["__main__"] = main
    exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)


def exit_code(exc: SystemExit) -> int:
    """The exit status a fresh interpreter gives for `exc` (a non-integer code is printed, status 1)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def report_exception(exc: BaseException) -> None:
    """Print the traceback a fresh interpreter would: without the frames of runpy and this file."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in OWN_FILES:
        tb = tb.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # the hook prints the exception's own traceback


def become_probe(fds: list[int], sock: socket.socket, stamp: mmap.mmap) -> int:
    """In the forked child: reset what a fresh interpreter would have fresh, stamp the instant it is
    ready into `stamp` (then unmap it: the probe never holds it), and run the probe as __main__;
    returns its exit status."""
    request_fd, stdin_fd, out_fd, err_fd = fds
    os.setsid()  # its own session and process group: the deadline kills the whole group
    prctl_dumpable(1)  # the parent is undumpable; the probe is as a fresh process (its own /proc/self)
    with open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")  # the OOM killer's first pick, never the parent or the supervisor
    request = json.loads(read_all(request_fd))
    for fd, target in ((stdin_fd, 0), (out_fd, 1), (err_fd, 2)):
        os.dup2(fd, target)
    sock.detach()  # the socket's fd is closed below; its object must never close a reused number
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    for sig in SHIELD:
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env, cwd = request["env"], request["cwd"]
    probe = warmplan.Probe(request["argv"], cwd)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # A ticking clock (worker/box/warmclient.py): a new FAKETIME makes libfaketime start this child's
    # clock at the instant on its next read. Set in the C environment only: os.environ stays the
    # probe's, as a fresh interpreter's would be.
    if request.get("faketime") and _libc().setenv(b"FAKETIME", request["faketime"].encode(), 1) != 0:
        raise OSError(ctypes.get_errno(), "setenv(FAKETIME) failed")
    time.tzset()
    for name in [m for m in sys.modules if m not in WARM]:
        del sys.modules[name]
    sys.path_importer_cache.clear()
    sys.path[:] = warmplan.child_path(probe, env, BASE_PATH)
    sys.argv[:] = probe.argv
    sys.stdin = sys.__stdin__ = stream(0, sys.__stdin__, "r")
    sys.stdout = sys.__stdout__ = stream(1, sys.__stdout__, "w")
    sys.stderr = sys.__stderr__ = stream(2, sys.__stderr__, "w")
    # A fresh interpreter imports sitecustomize/usercustomize from PYTHONPATH too (not the script's folder).
    on_pythonpath = warmplan.shadowed(warmplan.pythonpath(env))
    for hook in ("sitecustomize", "usercustomize"):
        if hook in on_pythonpath:
            sys.modules.pop(hook, None)
            try:
                __import__(hook)
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
                print(f"Error in {hook}; set PYTHONVERBOSE for traceback:\n{why}", file=sys.stderr)
    if "random" in sys.modules:
        sys.modules["random"].seed()  # from os.urandom, as a fresh import would
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    stamp[:] = time.monotonic_ns().to_bytes(8, "little")
    stamp.close()
    try:
        if probe.module is not None:
            runpy._run_module_as_main(probe.module, alter_argv=True)  # what `python3 -m` runs
        elif os.path.isfile(probe.script):
            run_script(probe.script)
        else:  # a folder or zip with __main__.py
            runpy.run_path(probe.script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exit_code(exc)
    except BaseException as exc:
        report_exception(exc)
        code = 1
    return finish(code)


def finish(code: int) -> int:
    """What a fresh interpreter does at exit: join threads, run atexit, flush (120 when that fails)."""
    threading = sys.modules.get("threading")
    if threading is not None:
        with contextlib.suppress(BaseException):
            threading._shutdown()
    atexit._run_exitfuncs()
    for out in (sys.stdout, sys.stderr):
        try:
            out.flush()
        except BaseException:
            code = 120 if code == 0 else code
    return code


def serve(sock: socket.socket, stamp: mmap.mmap, run=become_probe) -> None:
    """Fork a child per request until the supervisor closes its end, each running `run`; each report says
    how long the child took from the fork to the probe's start (`fork`, seconds; None when it never got there)."""
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 4)
        except OSError:
            return
        if not msg:
            return
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            send(sock, {"error": f"expected 4 descriptors, got {len(fds)}"})
            continue
        stamp[:] = bytes(8)
        forked = time.monotonic_ns()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                code = run(fds, sock, stamp)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        send(sock, {"pid": pid})
        _, status, usage = os.wait4(pid, 0)
        ready = int.from_bytes(stamp[:8], "little")
        fork = (ready - forked) / 1e9 if ready >= forked else None
        report = {"status": status, "user": usage.ru_utime, "sys": usage.ru_stime, "rss": usage.ru_maxrss}
        send(sock, {**report, "fork": fork})


def rehearse(stamp: mmap.mmap) -> None:
    """Serve one request, over a socket of our own, whose child ends at once. What a pass of `serve`
    leaves allocated for good (the first calls' caches) is then there before the first real child forks:
    with ASLR off, every child, the first too, forks from the same heap and gets the same addresses."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    null = os.open(os.devnull, os.O_RDWR)
    try:
        socket.send_fds(theirs, [b"go"], [null] * 4)
    finally:
        os.close(null)
    theirs.shutdown(socket.SHUT_WR)  # serve returns at the end of its one request
    serve(ours, stamp, lambda fds, sock, stamp: 0)
    ours.close()
    theirs.close()


def main() -> int:
    sock = socket.socket(fileno=int(sys.argv[1]))
    for sig in SHIELD:
        signal.signal(sig, signal.SIG_IGN)  # a probe's stray signal must not end the parent
    prctl_dumpable(0)  # no child can read or write this process's memory through /proc
    stamp = mmap.mmap(-1, 8)  # shared with each child until it unmaps it, just before the probe runs
    personality = _libc().personality
    personality.argtypes = [ctypes.c_ulong]
    if personality(PER_QUERY) & ADDR_NO_RANDOMIZE:  # started so by the supervisor (warmclient.Knobs.aslr)
        rehearse(stamp)
    send(sock, {"ready": True, "imported": IMPORTED, "refused": REFUSED, "hash_seed": os.environ.get("PYTHONHASHSEED")})
    serve(sock, stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
