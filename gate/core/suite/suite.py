"""The suite's models (gate.toml): the probe command, the fixture tree, the checks module, the sampler,
ledger and image sections, and the classified properties (`gate.core.suite.property`). Validation is
strict: an unknown key is refused. Reading the file is `gate.io.suite`'s.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from gate.core.suite.property import STRICT, PropertySpec
from gate.core.suite.trial import Limits
from gate.core.verdicts.bands import SamplerWindow
from gate.core.verdicts.verdict import Band


class SamplerConfig(BaseModel):
    model_config = STRICT
    window: StrictInt = Field(20, ge=1, le=100_000)
    max_inconclusive: StrictInt = Field(4, ge=0)

    def empty_window(self) -> SamplerWindow:
        return SamplerWindow(size=self.window, max_inconclusive=self.max_inconclusive)


class LedgerConfig(BaseModel):
    model_config = STRICT
    budget: StrictInt = Field(2, ge=0, le=100)
    ttl_hours: StrictFloat = Field(6.0, gt=0, le=24 * 30)
    # More than one faulted property and more than this share of them: a broken harness, no credits.
    max_fault_share: StrictFloat = Field(0.25, gt=0, le=1)


class ImageConfig(BaseModel):
    """The project image probes run in (`[suite.image]`): a Dockerfile built `FROM` the probegate base
    image, or a lock file of hashed requirements probegate builds one from. Either is an oracle file,
    read from the base like the suite: a patch that edits it is an oracle edit, never a build."""

    model_config = STRICT
    dockerfile: str | None = None
    requirements: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ImageConfig:
        if (self.dockerfile is None) == (self.requirements is None):
            raise ValueError("give exactly one of dockerfile (FROM the probegate base) or requirements (a lock file)")
        return self

    @property
    def definition(self) -> str:
        """The file that defines the image, relative to gate.toml's folder."""
        return self.dockerfile or self.requirements or ""


@dataclass(frozen=True)
class ImageSource:
    """Where the run's project image is defined: the file as read (from the base revision when the
    run has one) and its name in gate.toml, for messages."""

    kind: Literal["dockerfile", "requirements"]
    definition: Path
    label: str


_PYTHON = re.compile(r"python(3(\.[0-9]+)?)?")


def warm_refusal(probe: tuple[str, ...]) -> str | None:
    """Why a warm interpreter cannot run `probe` (None: it can): only `python3 SCRIPT [ARGS]` and
    `python3 -m MODULE [ARGS]` start the way a forked child can reproduce."""
    if not _PYTHON.fullmatch(Path(probe[0]).name):
        return f"runs Python probes only; the probe starts with {probe[0]!r}, not python3"
    if len(probe) < 2 or (probe[1].startswith("-") and probe[1] != "-m") or (probe[1:2] == ("-m",) and len(probe) < 3):
        return "needs a probe of the form 'python3 SCRIPT [ARGS]' or 'python3 -m MODULE [ARGS]'"
    return None


class SuiteConfig(BaseModel):
    model_config = STRICT
    name: str = "suite"
    probe: tuple[str, ...] = ("python3", "probe.py")
    fixtures: str = "fixtures"
    checks: str = "checks.py"
    freeze_file: str | None = None
    calibration: str | None = None
    oracle: tuple[str, ...] = ()
    # Globs (relative to the patched tree) of files the gate itself writes there: the card, the
    # books. Left out of the tree's digest at run time and by `accept`, so writing them changes nothing.
    outputs: tuple[str, ...] = ()
    # The seal file and the card, relative to gate.toml's folder, so `gate run` and `gate accept`
    # need no --seal/--card. The card is an output: left out of the tree's digest like `outputs`.
    seal: str | None = None
    card: str | None = None
    # The card-signing key's public half (PEM), relative to gate.toml's folder: an oracle file, read
    # from the base with --base. When set, `gate accept` requires the card's signature by it.
    public_key: str | None = None
    # Outside a git work tree, which files make the patched tree (globs relative to it; in git the
    # tree is what git tracks plus untracked files it does not ignore). `exclude` applies in both.
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    # Folders of the patched tree put on the probe's PYTHONPATH (e.g. "src" for a src/ layout).
    pythonpath: tuple[str, ...] = ()
    # "fresh": each trial a new `python3`; "warm": each trial a child forked from a parent that
    # pre-imported the image's distributions (docs/reference/sandbox.md#warm-interpreters).
    interpreter: Literal["fresh", "warm"] = "fresh"
    image: ImageConfig | None = None
    # The share of safety/contract trials run again on a second worker (at least one per property
    # when above 0); a local pool has no second worker and cross-checks nothing.
    cross_check: StrictFloat = Field(0.05, ge=0, le=1)
    # How likely one worker's lies that turn a statistical row may all go unreplayed (docs/explanation/trust.md,
    # "Statistical replays and their bound"): 0, never, by replaying all but the band's margin of each worker's hits.
    replay_escape: StrictFloat = Field(0.0, ge=0, lt=1)
    # Each check call runs in the check process (gate.io.checkproc) and is a miss when it has not
    # returned within this many seconds, or when that process grows past this many MiB of address space.
    check_deadline_s: StrictFloat = Field(5.0, gt=0, le=600)
    check_memory_mb: StrictInt = Field(1024, ge=256, le=1_048_576)
    sampler: SamplerConfig = SamplerConfig()
    ledger: LedgerConfig = LedgerConfig()
    limits: Limits = Limits()

    @field_validator("probe", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:  # e.g. an unbalanced quote
            raise ValueError(f"cannot split {value!r} into arguments: {exc}") from None

    @field_validator("probe")
    @classmethod
    def _runnable(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or not value[0]:
            raise ValueError('is empty; give the command that runs the probe, e.g. "python3 probe.py"')
        if any("\0" in arg for arg in value):
            raise ValueError("holds a NUL byte, which no command line can carry")
        return value

    @model_validator(mode="after")
    def _warm_runs_python(self) -> SuiteConfig:
        if self.interpreter == "warm" and warm_refusal(self.probe):
            raise ValueError(f'interpreter = "warm" {warm_refusal(self.probe)}')
        return self

    @field_validator("pythonpath")
    @classmethod
    def _inside_tree(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parts = Path(entry).parts
            if not entry or Path(entry).is_absolute() or ".." in parts or ":" in entry:
                raise ValueError(f'{entry!r} must be a folder inside the patched tree, like "src"')
        return value

    @field_validator(
        "fixtures", "checks", "freeze_file", "calibration", "oracle", "seal", "card", "public_key", "include", "exclude"
    )
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        paths = value if isinstance(value, tuple) else (value,)
        if any(isinstance(path, str) and "\0" in path for path in paths):
            raise ValueError("holds a NUL byte, which no path can carry")
        return value

    @field_validator("limits", mode="before")
    @classmethod
    def _numbers_are_numbers(cls, value: Any) -> Any:
        # Limits (gate.core.suite.trial) is lax; in gate.toml a limit given as a string or bool is a mistake.
        if isinstance(value, dict):
            for key, given in value.items():
                field = Limits.model_fields.get(key) if isinstance(key, str) else None
                if field is None:
                    continue  # Limits refuses unknown keys itself
                wanted = (int, float) if field.annotation is float else (int,)
                kind = "a number" if float in wanted else "an integer"
                if isinstance(given, bool) or not isinstance(given, wanted):
                    raise ValueError(f"{key} must be {kind}, not {type(given).__name__}")
                if isinstance(given, float) and not math.isfinite(given):
                    raise ValueError(f"{key} must be finite, not {given}")
        return value


class Suite(BaseModel):
    """A validated suite; paths in `config` are resolved against `root` (gate.toml's folder)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    path: Path
    root: Path
    sha256: str
    config: SuiteConfig
    properties: tuple[PropertySpec, ...]

    def resolve(self, relative: str) -> Path:
        return (self.root / relative).resolve()

    def with_interpreter(self, mode: Literal["fresh", "warm"] | None) -> Suite:
        """This suite with its trials run in interpreter `mode` (None: as the suite says); ValueError when
        its probe cannot run warm."""
        if mode is None or mode == self.config.interpreter:
            return self
        if mode == "warm" and (why := warm_refusal(self.config.probe)):
            raise ValueError(why)
        return self.model_copy(update={"config": self.config.model_copy(update={"interpreter": mode})})

    @property
    def checks_path(self) -> Path:
        return self.resolve(self.config.checks)

    @property
    def calibration_path(self) -> Path | None:
        return self.resolve(self.config.calibration) if self.config.calibration else None

    @property
    def seal_path(self) -> Path | None:
        return self.resolve(self.config.seal) if self.config.seal else None

    @property
    def card_path(self) -> Path | None:
        return self.resolve(self.config.card) if self.config.card else None

    @property
    def image_definition(self) -> Path | None:
        """The Dockerfile or lock file of the project image, when the suite names one."""
        return self.resolve(self.config.image.definition) if self.config.image else None

    def image_source(self, definition: Path | None = None) -> ImageSource | None:
        """The project image's source; `definition` is where the file was read (the base's copy)."""
        image = self.config.image
        if image is None:
            return None
        kind: Literal["dockerfile", "requirements"] = "dockerfile" if image.dockerfile else "requirements"
        return ImageSource(kind, definition or self.resolve(image.definition), label=image.definition)

    @property
    def public_key_path(self) -> Path | None:
        return self.resolve(self.config.public_key) if self.config.public_key else None

    @property
    def freeze_path(self) -> Path | None:
        return self.resolve(self.config.freeze_file) if self.config.freeze_file else None

    def bands(self) -> dict[str, Band]:
        return {p.id: p.band for p in self.properties}

    def named_paths(self) -> list[tuple[str, str]]:
        """Every file or folder gate.toml names, as (field, the path as written): each must stay in
        the suite's repository (`outside_repository`)."""
        config = self.config
        named = [("suite.fixtures", config.fixtures), ("suite.checks", config.checks)]
        for key in ("freeze_file", "calibration", "seal", "card", "public_key"):
            value = getattr(config, key)
            if value is not None:
                named.append((f"suite.{key}", value))
        if config.image is not None:
            named.append((f"suite.image.{'dockerfile' if config.image.dockerfile else 'requirements'}",
                          config.image.definition))  # fmt: skip
        return named

    def named_globs(self) -> list[tuple[str, str]]:
        """The globs gate.toml names for files in the repository (oracle files, the gate's outputs)."""
        return [(f"suite.oracle.{i}", g) for i, g in enumerate(self.config.oracle)] + [
            (f"suite.outputs.{i}", g) for i, g in enumerate(self.config.outputs)
        ]

    def outside_repository(self, repository: str) -> tuple[str, str] | None:
        """The first (field, path) gate.toml names that leaves `repository` (an absolute, normalised
        folder holding gate.toml) when joined to gate.toml's folder, or is absolute; a glob with an
        absolute or '..' part. Lexical only: the file system's links are the reader's to check."""
        root = os.path.normpath(self.root)
        for field, value in self.named_paths():
            if os.path.isabs(value) or not _within(os.path.normpath(os.path.join(root, value)), repository):
                return field, value
        for field, pattern in self.named_globs():
            if os.path.isabs(pattern) or ".." in pattern.replace("\\", "/").split("/"):
                return field, pattern
        return None


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
