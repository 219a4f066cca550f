"""Gate commands for the integration tests from a zygote: one process per xdist worker that has loaded the gate's
modules once and forks a child for each `gate run` / `gate accept` a test starts. Each child is still its own
process (own pid, stdio pipes, environment, working folder, exit status, signals) running the real entry point
to a normal interpreter exit; only the interpreter's start and the imports are shared. Process accounting put
those at about half of each coordinator's CPU and the coordinators at about half of a CI run's, on a machine
where the tests are CPU-bound.

What a fork cannot give a command, it does not get from here: a request whose environment changes what the
interpreter reads at its own start (any PYTHON* variable) runs as a plain subprocess, and the zygote loads no
module that reads the environment at import (worker.celery reads PROBEGATE_VISIBILITY_TIMEOUT): those load in
the child. Each child draws fresh `random` state; the hash seed is the zygote's. PROBEGATE_TEST_ZYGOTE=0 turns
it off. The console script's own start and `python -m` are still run for real by the wheel flow (.ci/wheel) and
the tests that start `gate` as a user does (gate_runs.script_run)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

PRELOAD = ("gate.cli.main", "gate.run.runner", "gate.io.artifacts", "worker.host.sandboxes.docker", "gate.cli.accept")


# ---- the zygote's side (this file run as a script) -------------------------------------------------------------


def _serve(path: str) -> dict:
    """Answer requests until killed; returns only in a forked child, with the request it must become."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)  # the path appears only once it is listening
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    waiting: dict[int, socket.socket] = {}  # child pid -> the connection its status goes back on
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    parent = os.getppid()
    while True:
        if os.getppid() != parent:  # the test process that started it is gone: so is the zygote
            os._exit(0)
        for key, _ in selector.select(timeout=5):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
                while chunk := conn.recv(1 << 16):  # the rest of the request, to the client's end of writing
                    msg += chunk
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for sock in (listener, conn, *waiting.values()):
                        sock.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                        os.close(fd)
                    return json.loads(msg)
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"{pid}\n".encode())
                waiting[pid] = conn
            else:
                while os.read(wake_r, 512) == 512:
                    pass
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = waiting.pop(pid, None)
            if conn is not None:
                code = os.waitstatus_to_exitcode(status)
                try:
                    conn.sendall(f"{code}\n".encode())
                finally:
                    conn.close()


def _become(request: dict) -> None:
    """In the forked child: take on the request's environment, folder and argv, then run its entry point."""
    import random
    import runpy

    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    random.seed()  # as a fresh interpreter would, not the zygote's state in every child
    if not request["safe_path"]:
        sys.path.insert(0, os.getcwd())  # what `python -m` puts first
    sys.argv = [request["argv0"], *request["args"]]
    if request["module"]:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    else:
        from gate.cli import entry

        entry()


def _zygote_main() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    assert threading.active_count() == 1, "a zygote must not fork with threads running"
    _become(_serve(sys.argv[1]))  # the zygote never returns from _serve; its children run on from here


# ---- the tests' side -------------------------------------------------------------------------------------------


class _Zygote:
    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="probegate-zygote-")
        self.path = os.path.join(self.folder, "z.sock")
        self.proc = subprocess.Popen(
            [sys.executable, "-P", __file__, self.path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # never the test process's stdout (xdist may talk through it)
            start_new_session=True,
        )
        give_up = time.monotonic() + 60
        while not os.path.exists(self.path):
            if self.proc.poll() is not None or time.monotonic() > give_up:
                raise RuntimeError(f"the test zygote did not start (exit {self.proc.poll()})")
            time.sleep(0.01)  # its socket appearing is the event; this is the poll's pace
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self.folder)

    def run(
        self,
        module: str | None,
        argv0: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        timeout: float,
        *,
        safe_path: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        request = {"module": module, "argv0": argv0, "args": list(args), "env": dict(env), "cwd": cwd}
        request["safe_path"] = safe_path or module is None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(self.path)
            data = json.dumps(request).encode()
            socket.send_fds(conn, [data[:1]], [null, out_w, err_w])  # the descriptors ride on the first byte
            conn.sendall(data[1:])
            conn.shutdown(socket.SHUT_WR)
            for fd in (null, out_w, err_w):
                os.close(fd)
            lines = conn.makefile("r")
            pid = int(lines.readline())
            out, err = _read_both(out_r, err_r, time.monotonic() + timeout, pid)
            said = lines.readline()
        code = int(said) if said.strip() else -signal.SIGKILL
        return subprocess.CompletedProcess([argv0, *args], code, out, err)


def _read_both(out_r: int, err_r: int, deadline: float, pid: int) -> tuple[str, str]:
    """Both pipes to their end; past `deadline` the child is killed (as subprocess.run's timeout would)."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired([str(pid)], 0)
            for key, _ in selector.select(timeout=min(left, 5)):
                data = os.read(key.fd, 1 << 16)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
                    os.close(key.fd)
    return b"".join(chunks[out_r]).decode(errors="replace"), b"".join(chunks[err_r]).decode(errors="replace")


_lock = threading.Lock()
_zygote: _Zygote | None = None


def gate_command(
    module: str | None,
    argv0: str,
    args: Sequence[str],
    *,
    safe_path: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`python -m MODULE ARGS` (`safe_path`: `python -P -m`; MODULE None: the `gate` console script, `argv0`)
    with its output captured as text, as `subprocess.run(..., capture_output=True, text=True)` gives it; from
    the zygote when it can."""
    environment = dict(os.environ if env is None else env)
    where = str(cwd or os.getcwd())
    interpreter_env = {k: v for k, v in environment.items() if k.startswith("PYTHON")}
    if os.environ.get("PROBEGATE_TEST_ZYGOTE") == "0" or interpreter_env != _zygote_python_env():
        if module is None:
            argv = [argv0, *args]
        else:
            argv = [sys.executable, *(("-P",) if safe_path else ()), "-m", module, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=environment, cwd=where)
    global _zygote
    with _lock:
        if _zygote is None or _zygote.proc.poll() is not None:
            _zygote = _Zygote()
        zygote = _zygote
    return zygote.run(module, argv0, args, environment, where, timeout, safe_path=safe_path)


def _zygote_python_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}


if __name__ == "__main__":
    _zygote_main()
