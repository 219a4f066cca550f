"""The check process's own side: loads the suite's checks once, then judges one trial per request
until its input ends. Started by `gate.io.checkproc` as `python -I`, so nothing of the environment or
the current folder (the patched tree, perhaps) is on its import path; it imports this module, what
`gate.core.checks` needs and the checks module's bytes the coordinator read from the oracle.

The protocol, on the descriptors that were stdin and stdout: frames of an 8-byte big-endian length
and a body. The coordinator sends pickles (it is trusted here); this side answers with a tag byte
and text (the coordinator reads it as data, never unpickles what this process, which reads the
patch's output, wrote). First the setup, `(ChecksModule, memory_mb)`, answered `R` (ready) or `S`
and the error; then one request per trial, `(property_id, band, context, Observation)` with
`context` the property's `(fixture, params, clock)` when it is new to this process (else None),
answered `O` and the outcome's JSON, `M` (out of memory) or `F` and what the check raised past `judge`.
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import sys
from typing import Any, BinaryIO

from gate.core.checks import Check, Trial, judge
from gate.core.errors import GateError
from gate.core.suite.trial import ClockSpec
from gate.core.verdicts.verdict import Band
from gate.io.checks import ChecksModule

HEADER = 8
READY, STARTUP_ERROR, OUTCOME, OUT_OF_MEMORY, FAILED = b"R", b"S", b"O", b"M", b"F"
Context = tuple[bytes, Any, ClockSpec | None]  # a property's fixture, params and clock


def main(argv: list[str]) -> None:
    """`argv`: the coordinator's pid, and "1" when this process is to die with it (see `_die_with`)."""
    # Ctrl-C reaches the terminal's whole process group; the coordinator ends this process itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if argv[1:2] == ["1"]:
        _die_with(int(argv[0]))
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    # A check's print() or input() must never reach the protocol: stdout goes to stderr, stdin reads nothing.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr  # line-buffered: a child killed at a deadline has flushed what it printed
    setup = _read_frame(requests)
    if setup is None:
        return
    module, memory_mb = pickle.loads(setup)
    _bound_memory(memory_mb)
    try:
        checks = _load(module)
    except GateError as exc:
        _write_frame(replies, STARTUP_ERROR + str(exc).encode("utf-8", "backslashreplace"))
        return
    _write_frame(replies, READY)
    contexts: dict[str, Context] = {}
    while (frame := _read_frame(requests)) is not None:
        _write_frame(replies, _judged(checks, contexts, frame))


def _load(module: ChecksModule) -> dict[str, Check]:
    try:
        return module.load()
    except MemoryError:
        raise GateError("importing the checks module failed: MemoryError") from None


def _judged(checks: dict[str, Check], contexts: dict[str, Context], frame: bytes) -> bytes:
    """One request answered: the outcome `judge` gives, as in the coordinator, unless memory ran out."""
    ran_out = False
    try:
        property_id, band, context, observation = pickle.loads(frame)
        if context is not None:
            contexts[property_id] = context
        fixture, params, clock = contexts[property_id]
        trial = Trial(observation, fixture, params, clock)
        check = checks[property_id]

        def bounded(seen: Trial) -> bool | None:
            nonlocal ran_out
            try:
                return check(seen)
            except MemoryError:
                # `judge` would make this "check raised MemoryError": a miss either way, said plainly.
                ran_out = True
                raise

        outcome = judge(bounded, trial, Band(band))
        if ran_out:
            return OUT_OF_MEMORY
        return OUTCOME + outcome.model_dump_json().encode()
    except MemoryError:
        return OUT_OF_MEMORY  # a constant: answering needs no memory a check used up
    except BaseException as exc:
        # What `judge` lets through (KeyboardInterrupt, GeneratorExit raised by a check; a request
        # this side cannot read): the check did not judge, so the coordinator counts a miss.
        return FAILED + type(exc).__name__.encode()


def _bound_memory(memory_mb: int) -> None:
    """The address space capped (soft and hard: a check cannot lift it), or the lower cap already set."""
    wanted = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_AS, (wanted, wanted))


def _die_with(parent: int) -> None:
    """Killed when the coordinator dies, even in the middle of a check stuck in C code (no thread of
    this process could run then). Linux ties this to the thread that started the process, so the
    coordinator asks for it only from its main thread, whose end is the process's end."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the coordinator died before the request took effect
        os._exit(0)


def _read_frame(stream: BinaryIO) -> bytes | None:
    header = stream.read(HEADER)
    if len(header) < HEADER:
        return None
    size = int.from_bytes(header, "big")
    body = stream.read(size)
    return body if len(body) == size else None


def _write_frame(stream: BinaryIO, body: bytes) -> None:
    stream.write(len(body).to_bytes(HEADER, "big") + body)
    stream.flush()
