"""The run request carries only what `gate/run` reads: every field of RunRequest is read somewhere in
gate/run (where trials run — broker, jobs, workers — is the command line's, in gate.cli.executors)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import gate.run
from gate.run.request import RunRequest

RUN = Path(gate.run.__file__).parent


def test_every_request_field_is_read_by_the_run() -> None:
    """A field nobody in gate/run reads would only ride through, back up to the command line."""
    source = "\n".join(path.read_text() for path in RUN.glob("*.py"))
    unread = [f.name for f in dataclasses.fields(RunRequest) if not re.search(rf"\.{f.name}\b", source)]
    assert unread == []
