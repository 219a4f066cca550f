"""Every error the gate raises on purpose, and the exit code each one means.

    GateError                      root; never raised itself
    ├── UsageError                 bad command line                          → RET_USAGE
    ├── ConfigError                a file the user wrote is wrong            → RET_CONFIG
    │   ├── SuiteError             gate.toml / checks module (file, property)
    │   ├── FreezeFileError        the flake-freeze file (file, freeze id)
    │   ├── FixtureTreeError       what a tree cannot hold: a symlink or special file in a fixture
    │   │                          tree; a special file or a symlink leading out of the patched tree
    │   ├── TreeTooLargeError      the patched tree does not fit the sandbox's [suite.limits]
    │   │                          (space, file size, file count): refused before any container
    │   ├── ImageError             the project image cannot be built, or the preflight refuses it
    │   ├── JournalError           a run journal `gate run --resume` cannot reuse (not this run's, edited)
    │   └── TokenError             a join token that does not parse, or that the coordinator refused
    ├── InputMissingError          a named file or directory does not exist → RET_NOINPUT
    └── HarnessError               the gate itself could not observe         → RET_HARNESS
        ├── SealDriftError         the fixture tree no longer matches its seal (digest, files)
        ├── SandboxError           image missing, container failed, daemon gone
        └── BrokerError            the broker, blob store or Redis ledger could not be reached

A HarnessError raised while trials run never escapes to the user: it becomes a `harness_error`
verdict for the affected property. Only faults before planning (e.g. no Docker at all when the
card cannot be produced) reach the CLI as an exit code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from gate.core.escaping import one_line

RET_OK = 0  # accepted: every voting property passed, or nothing blocks the job
RET_BLOCKED = 1  # blocked by the patch: fail_safety / fail_contract on a voting property
RET_HARNESS = 2  # broken harness: harness credits exhausted, or a fault with no credit to draw
RET_SAMPLER = 3  # sampler too noisy: more inconclusive_sample than the window budget allows
RET_USAGE = 64  # command line misuse (EX_USAGE)
RET_CONFIG = 65  # a suite, freeze, seal or card file is malformed (EX_DATAERR)
RET_NOINPUT = 66  # a file or directory named on the command line is missing (EX_NOINPUT)
RET_INTERNAL = 70  # a bug in the gate itself (EX_SOFTWARE); the traceback goes to stderr
RET_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); SIGTERM gives 143: everything the run started removed, no card
RET_PIPE = 141  # stdout closed early (`gate schema card | head`): 128 + SIGPIPE, never read as success


class GateError(Exception):
    """Root of the gate's errors; `exit_code` says what the process should return."""

    exit_code: int = RET_INTERNAL

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.field = field

    def __str__(self) -> str:
        """`file: field: message` on one line; user data can neither break the line nor drive a terminal."""
        where = ""
        if self.file:
            where = f"{one_line(str(self.file))}: "
        if self.field:
            where += f"{one_line(str(self.field))}: "
        return f"{where}{one_line(str(self.message))}"


class UsageError(GateError):
    exit_code = RET_USAGE


class ConfigError(GateError):
    exit_code = RET_CONFIG


class SuiteError(ConfigError):
    """gate.toml or its checks module is wrong; `field` names the property or key."""


class FreezeFileError(ConfigError):
    """The flake-freeze file is wrong (e.g. it tries to freeze a safety property)."""


class FixtureTreeError(ConfigError):
    """A tree holds something that cannot be sealed: a symlink, device or fifo in a fixture tree; a
    device, fifo or a symlink leading out of the tree in the patched tree."""


class TreeTooLargeError(ConfigError):
    """The patched tree cannot be laid out in the sandbox under the suite's limits; nothing was run.
    A configuration error, not a verdict: the suite's limits (or its exclude globs) must change, or
    the tree; no card is written and no harness credit is drawn."""


class ImageError(ConfigError):
    """The suite's project image: a dependency with no wheel, a Dockerfile not built FROM the base, or
    an image whose environment, user or clock preload the preflight refuses. Nothing runs in it."""


class JournalError(ConfigError):
    """A run journal that `gate run --resume` refuses: bound to another run, tree, image, suite or seal,
    edited, or of a run that already reached its commit. Nothing runs and nothing is written."""


class TokenError(ConfigError):
    """A join token (`gate-worker join`) that does not parse, or whose join the coordinator refused (used,
    expired or revoked invite, a replayed request): the server is not enrolled and serves nothing."""


class InputMissingError(GateError):
    exit_code = RET_NOINPUT


class HarnessError(GateError):
    exit_code = RET_HARNESS


class SealDriftError(HarnessError):
    """The fixture tree's digest differs from the seal file; `changed` lists the files."""

    def __init__(self, message: str, *, file: str | None = None, changed: tuple[str, ...] = ()) -> None:
        super().__init__(message, file=file)
        self.changed = changed


class SandboxError(HarnessError):
    """The sandbox could not run a trial (no daemon, no image, container failed to start)."""


class BrokerError(HarnessError):
    """The broker, the blob store or a Redis ledger could not be reached (Redis down, connection reset)."""


def last_line(exc: BaseException) -> str:
    """The last non-empty line of an exception's text (client errors often span several), else its type."""
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


@contextlib.contextmanager
def reraise_as(error: type[GateError], what: str, caught: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Run a call at an edge: an exception of `caught` leaves as `error("{what}: reason")`, cause kept."""
    try:
        yield
    except caught as exc:
        raise error(f"{what}: {last_line(exc)}") from exc
