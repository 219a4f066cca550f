"""The `gate` command line's entry: parse, dispatch to the subcommand's handler, and turn every user mistake into one
line on stderr and a documented exit code (see gate.core.errors); only a bug in the gate prints a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import select
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from gate.cli.arguments import build_parser
from gate.cli.settings import GateSettings
from gate.core.errors import (
    RET_INTERNAL,
    RET_INTERRUPTED,
    RET_OK,
    RET_PIPE,
    GateError,
)
from gate.io import interrupts

EXIT_GRACE_S = 2.0  # after Ctrl-C, how long exit waits for threads still returning from a removed container
# Loading a command builds about 100,000 long-lived objects (the models' schemas, the engine client's regexes):
# at the interpreter's default threshold (700) the cyclic collector walks them over and over and frees nothing,
# a noticeable share of the CPU a run's imports take. Collections stay on.
GC_THRESHOLD = 50_000


def dispatch(args: argparse.Namespace) -> int:
    """Run the handler the parsed subcommand names (`module:function`), importing its module only now."""
    module, _, function = args.handler.partition(":")
    handler: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), function)
    return handler(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `gate` command and return its exit code (gate.core.errors); only a bug prints a traceback."""
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version: printed, exit 0 (mistakes raise UsageError instead)
            sys.stdout.flush()
            return exc.code if isinstance(exc.code, int) else RET_OK
        args.settings = GateSettings.from_env(os.environ)  # the one read of the environment's settings
        with interrupts.routed():  # SIGINT/SIGTERM: everything started is removed, then exit 128+signal
            code = dispatch(args)
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at interpreter exit
        return code
    except GateError as exc:
        print(f"gate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print("gate: interrupted", file=sys.stderr)
        return exc.exit_code if isinstance(exc, interrupts.Interrupted) else RET_INTERRUPTED
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            return _quiet_stdout()
        traceback.print_exc()
        print("gate: internal error (a bug in probegate; please report it with the traceback above)", file=sys.stderr)
        return RET_INTERNAL


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The console script: `main`, then exit. After a signal the interpreter's own exit (which joins
    the thread pools' threads) gets EXIT_GRACE_S, not more: everything of ours a thread still busy
    could touch is removed already, so a slow engine call must not hold the exit."""
    code = main(argv)
    if interrupts.interrupted():
        threading.Thread(target=_exit_after, args=(code,), name="probegate-exit", daemon=True).start()
    sys.exit(code)


def _exit_after(code: int) -> None:
    time.sleep(EXIT_GRACE_S)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _stdout_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone (poll reports POLLERR/POLLHUP)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (e.g. captured in tests)
        return False


def _quiet_stdout() -> int:
    """Stop writing to the closed pipe, as the CPython docs advise: point stdout at /dev/null so the
    final flush at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return RET_PIPE
