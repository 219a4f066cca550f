"""The reviewed oracle files a run reads besides the suite: the flake-freeze file and the baseline
calibration. Each reader names the file in its one-line error; both are read before any container
starts, and applied once the fixture seal is known.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from gate.core.card.calibration import Calibration, calibration_from_json
from gate.core.errors import FreezeFileError
from gate.core.policy.freezes import FreezeFile, check_properties
from gate.core.suite.property import validation_line
from gate.core.suite.suite import Suite
from gate.io.inputs import decode_text, read_input, read_json


def read_freeze_file(suite: Suite) -> FreezeFile | None:
    """The freeze file the suite names, parsed and checked against the suite's bands; None when it names none."""
    path = suite.freeze_path
    if path is None:
        return None
    raw = read_json(path, "freeze file", missing="freeze file named in the suite is missing")
    try:
        parsed = FreezeFile.model_validate(raw)
    except ValidationError as exc:
        raise FreezeFileError(validation_line(exc), file=str(path)) from None
    check_properties(parsed, bands=suite.bands(), source=str(path))
    return parsed


def read_calibration(path: Path | None) -> Calibration | None:
    """The baseline calibration at `path`, parsed; None without a path."""
    if path is None:
        return None
    missing = "calibration file not found (make one with `gate baseline`)"
    data = read_input(path, "calibration file", missing=missing)
    return calibration_from_json(decode_text(data, path, "calibration file"), source=str(path))
