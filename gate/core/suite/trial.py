"""The values that cross the executor seam: what one trial is, and what a sandbox saw.

A `TrialSpec` says everything a worker needs and nothing it may judge: which tree (by digest),
which fixture bytes (by digest), the clock instant, the deadline and the limits. An
`Observation` is what came back; it carries facts only. Judging happens in `gate.core.checks`
and `gate.core.verdicts.verdict`.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

_FROZEN = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")


# Keys that exist in the tz database but do not name a zone: the host's own, and a placeholder.
_NOT_ZONES = frozenset({"localtime", "Factory", "posixrules"})


MAX_ZONE_PARTS = 4  # IANA keys have at most 3 (America/Argentina/Buenos_Aires)
MAX_ZONE_CHARS = 64  # the longest IANA key is about 30 characters


class ClockSpec(BaseModel):
    """The frozen instant a probe sees as wall time, from the fixture tree's clock.json."""

    model_config = _FROZEN
    frozen_at: datetime
    zone: str = "UTC"

    @field_validator("frozen_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("frozen_at needs an explicit offset, e.g. 2026-03-01T00:00:00Z")
        return value

    @field_validator("zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        # Only IANA keys: the probe's TZ gets this string, and libc would read a POSIX rule string,
        # "localtime" (the host's zone) or a "posix/"/"right/" copy as something else than the key says.
        parts = value.split("/")
        shaped = (
            # IANA keys have at most three parts and are short; a longer name is not tried (the zone
            # database is imported part by part: 400 parts overflow the interpreter's stack).
            len(parts) <= MAX_ZONE_PARTS
            and len(value) <= MAX_ZONE_CHARS
            and value[:1].isascii()
            and value[:1].isalpha()
            and all(part and all(c.isascii() and (c.isalnum() or c in "_+-") for c in part) for part in parts)
        )
        if not shaped or value in _NOT_ZONES or parts[0] in ("posix", "right"):
            shown = value if len(value) <= MAX_ZONE_CHARS else value[:MAX_ZONE_CHARS] + "…"
            raise ValueError(f"{shown!r} is not an IANA time zone name such as 'UTC' or 'Europe/Berlin'")
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise ValueError(f"unknown time zone {value!r}") from None
        return value

    @model_validator(mode="after")
    def _representable(self) -> ClockSpec:
        # faketimerc holds "%Y-%m-%d %H:%M:%S" at a fixed width (warm.UNBOUND_CLOCK is rewritten in place),
        # so the wall time in `zone` must fall in years 1000..9999.
        try:
            year = self.frozen_at.astimezone(ZoneInfo(self.zone)).year
        except OverflowError:
            year = 0
        if not 1000 <= year <= 9999:
            raise ValueError(
                f"frozen_at {self.frozen_at.isoformat()} in zone {self.zone} falls outside years 1000..9999, "
                "which the sandbox clock cannot represent"
            )
        return self

    def faketimerc(self) -> str:
        """The instant as libfaketime reads /etc/faketimerc: wall time in `zone` (it parses with mktime)."""
        return self.frozen_at.astimezone(ZoneInfo(self.zone)).strftime("%Y-%m-%d %H:%M:%S")


class Side(StrEnum):
    """Which tree a trial ran on: the patched tree, or (for a paired property) the base revision's."""

    PATCH = "patch"
    BASE = "base"


# A trial's identity: run, property, index and side. A base trial and the patch trial of the same index
# are two trials; neither may stand in for the other.
TrialKey = tuple[str, str, int, Side]


def _side_when_base(data: Any) -> Any:
    """A dump with `side` only on a base trial: a patch trial dumps (and digests) as it did before
    trials had sides, so stored records, journals and the wire keep their bytes."""
    if isinstance(data, dict) and data.get("side") in (Side.PATCH, Side.PATCH.value):
        del data["side"]
    return data


def _left_out(data: Any, name: str, unsaid: tuple[Any, ...]) -> Any:
    """A dump without `name` where it holds one of the `unsaid` values (what it was before the field)."""
    if isinstance(data, dict) and name in data and data[name] in unsaid:
        del data[name]
    return data


# Trial seeds are below 2**53: a card's and a record's numbers stay exact in every JSON reader.
MAX_SEED = 2**53 - 1

SANDBOX_UID = 65534  # the sandbox's user and group (nobody): probes and supervisors run as it


class Limits(BaseModel):
    """Resource limits for one probe container; defaults are safe for a small Python probe."""

    model_config = _FROZEN
    pids: int = Field(64, ge=8)
    memory_mb: int = Field(256, ge=32)
    cpus: float = Field(1.0, gt=0)
    tmpfs_mb: int = Field(64, ge=1)
    output_cap_bytes: int = Field(64 * 1024, ge=1024)
    file_size_mb: int = Field(64, ge=1)  # RLIMIT_FSIZE: no single file the probe writes grows past it
    nofile: int = Field(256, ge=32)  # RLIMIT_NOFILE for the supervisor and the probe
    tree_files: int = Field(20_000, ge=1)  # files (and symlinks) a patched tree may hold


class Interpreter(StrEnum):
    """How a probe's Python starts: a fresh interpreter per trial, or a child forked from a warm
    parent that pre-imported the image's own distributions (worker/box/warmparent.py)."""

    FRESH = "fresh"
    WARM = "warm"


MAX_HASH_SEED = 2**32 - 1  # PYTHONHASHSEED's range


class TrialSpec(BaseModel):
    """One trial of one property: run `probe_argv` in tree `tree_digest` with the fixture on stdin."""

    model_config = _FROZEN
    run_id: str
    property_id: str
    trial_index: int = Field(ge=0)
    # The coordinator's seed for this trial (gate.core.suite.plan.trial_seed), given to the probe as
    # PROBEGATE_TRIAL_SEED: its randomness is then a function of it, and the trial can be replayed.
    seed: int = Field(ge=0, le=MAX_SEED)
    probe_argv: tuple[str, ...]
    tree_digest: str
    fixture_path: str
    fixture_digest: str
    deadline_s: float = Field(gt=0)
    clock: ClockSpec
    limits: Limits = Limits()
    # A fresh secret per trial, planted in the probe's environment and a file; finding it in the
    # output is a safety failure (builtin:no_secret_in_output). Empty: none planted.
    canary: str = ""
    # The image ID the run resolved; a worker whose image differs refuses the trial as a harness fault.
    image_id: str = ""
    # Tree-relative folders on the probe's PYTHONPATH (the suite's `pythonpath`, e.g. a src/ layout).
    pythonpath: tuple[str, ...] = ()
    # The tree this trial runs on: a paired property's base trials carry Side.BASE and the base's tree.
    side: Side = Side.PATCH
    # The suite's `interpreter`: part of the spec (and so of its digest and its batch), so a card's
    # trials say which mode ran them.
    interpreter: Interpreter = Interpreter.FRESH
    # Sources of nondeterminism `gate flakes explain` holds fixed or lets vary (gate.core.policy.sources);
    # an ordinary run leaves all three as they are here. The probe's PYTHONHASHSEED (None: the sandbox's
    # own, fresh per interpreter; in warm mode the parent is started with it), its address-space layout
    # randomisation, and a clock that ticks from the frozen instant instead of standing still.
    hash_seed: int | None = Field(None, ge=0, le=MAX_HASH_SEED)
    aslr: bool = True
    clock_ticks: bool = False

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A fresh interpreter's spec dumps (and digests) as before the modes; a warm one says so. The
        # explain knobs likewise appear only when set.
        data = _left_out(_side_when_base(handler(self)), "interpreter", (Interpreter.FRESH, "fresh"))
        data = _left_out(data, "hash_seed", (None,))
        data = _left_out(data, "aslr", (True,))
        return _left_out(data, "clock_ticks", (False,))

    @property
    def key(self) -> TrialKey:
        """Identity of a trial: a second result with the same key is a duplicate, never a vote."""
        return (self.run_id, self.property_id, self.trial_index, self.side)


class Captured(BaseModel):
    """A captured output stream: the first `cap` bytes, plus the full length and digest."""

    model_config = _FROZEN
    data: bytes = b""
    length: int = 0
    sha256: str = hashlib.sha256(b"").hexdigest()

    @property
    def truncated(self) -> bool:
        return self.length > len(self.data)


class Change(StrEnum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"


class FileChange(BaseModel):
    """A path (absolute, inside the sandbox) that differs after the trial from before it."""

    model_config = _FROZEN
    path: str
    change: Change


class FaultOrigin(StrEnum):
    """Who caused a trial that could not be observed. Only a fault proven to come from outside the
    patch may draw a harness credit; the patch's own is judged against it."""

    HARNESS = "harness"  # proven outside the patch: engine, image, broker, blob store, a lost worker, an abort
    PATCH = "patch"  # the patched tree or its probe: the tree could not be laid out, the probe broke the trial
    UNKNOWN = "unknown"  # neither proven: a harness_error that never draws a credit


class WorkCopy(StrEnum):
    """How a trial's work dir was made (the sandbox chooses once per container, never per trial)."""

    OVERLAY = "overlay"  # a copy-on-write layer over a read-only copy of the tree laid out once
    COPY = "copy"  # a fresh copy of the whole tree, read back in full for writes


class Observation(BaseModel):
    """What a sandbox saw during one trial. `fault` set means the trial could not be observed;
    `fault_origin` says whose doing that was."""

    model_config = _FROZEN
    run_id: str
    property_id: str
    trial_index: int
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    duration_s: float = 0.0
    stdout: Captured = Captured()
    stderr: Captured = Captured()
    writes: tuple[FileChange, ...] = ()
    rusage_user_s: float = 0.0
    rusage_sys_s: float = 0.0
    max_rss_kb: int = 0
    # The trial's canary appeared somewhere in stdout or stderr (the whole stream, not just the head).
    canary_seen: bool = False
    image_id: str = ""
    worker_id: str = ""
    # The seed the sandbox gave the probe: the spec's, or the trial does not count (gate.core.trust.provenance).
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    fault: str | None = None
    fault_origin: FaultOrigin | None = None
    # The work dir's mode (None: the sandbox did not say, e.g. a fault before the trial ran), and why
    # copy mode ran where overlay was wanted (forced, or the host or container could not give it).
    work_copy: WorkCopy | None = None
    work_copy_note: str = ""
    side: Side = Side.PATCH  # the spec's: a worker answers for the tree it was sent
    # The mode the probe's Python ran in (None: the sandbox did not say), and in warm mode the
    # parent's PYTHONHASHSEED: the one thing a warm child cannot draw afresh (str/bytes hashes, set order).
    interpreter: Interpreter | None = None
    hash_seed: int | None = Field(None, ge=0, le=MAX_HASH_SEED)

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Unsaid, the mode and the seed are left out: records stored before the modes keep their bytes.
        data = _left_out(_side_when_base(handler(self)), "interpreter", (None,))
        return _left_out(data, "hash_seed", (None,))

    @property
    def key(self) -> TrialKey:
        return (self.run_id, self.property_id, self.trial_index, self.side)

    @classmethod
    def of(cls, spec: TrialSpec, **facts: Any) -> Observation:
        """An observation of `spec`'s trial (its key, side and seed copied from the spec) with these facts."""
        key = {
            "run_id": spec.run_id,
            "property_id": spec.property_id,
            "trial_index": spec.trial_index,
            "side": spec.side,
        }
        return cls(**key, **{"seed": spec.seed, **facts})  # a fact may name another seed (a test's worker)

    @classmethod
    def harness_fault(
        cls, spec: TrialSpec, detail: str, *, origin: FaultOrigin, worker_id: str = "", image_id: str = ""
    ) -> Observation:
        """An observation that records only that the trial could not be observed, and whose doing that was."""
        return cls.of(spec, fault=detail, fault_origin=origin, worker_id=worker_id, image_id=image_id)
