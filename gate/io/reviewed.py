"""The reviewed oracle files a run reads besides the suite: the flake-freeze file and the baseline
calibration. Each reader names the file in its one-line error.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from gate.core.calibration import calibration_from_json, deadline_source
from gate.core.card import DeadlineSource
from gate.core.errors import FreezeFileError, InputMissingError
from gate.core.freezes import FreezeFile, FreezeState, resolve
from gate.core.suite import Suite, one_line
from gate.io.artifacts import read_json


def load_freezes(suite: Suite, seal: str, now: datetime) -> FreezeState:
    """The freezes in force for this seal at `now`, from the freeze file the suite names (if any)."""
    path = suite.freeze_path
    if path is None:
        return FreezeState()
    if not path.is_file():
        raise InputMissingError("freeze file named in the suite is missing", file=str(path))
    try:
        parsed = FreezeFile.model_validate(read_json(path, "freeze file"))
    except ValidationError as exc:
        raise FreezeFileError(one_line(exc), file=str(path)) from None
    return resolve(parsed, bands=suite.bands(), seal=seal, now=now, source=str(path))


def load_deadline_sources(suite: Suite, path: Path | None, seal: str) -> dict[str, DeadlineSource]:
    """Which deadlines a baseline calibration under this seal backs; the rest are proposals."""
    calibration = None
    if path is not None:
        if not path.is_file():
            raise InputMissingError("calibration file not found (make one with `gate baseline`)", file=str(path))
        calibration = calibration_from_json(path.read_text(encoding="utf-8"), source=str(path))
    return {p.id: deadline_source(p.id, p.deadline_s, calibration, seal) for p in suite.properties}
