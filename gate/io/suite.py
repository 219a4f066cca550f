"""Loading the suite file (gate.toml): read, parse and validate it into `gate.core.suite.suite.Suite`.
Every problem is one SuiteError naming the file and the field; nothing else escapes.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gate.core.errors import SuiteError
from gate.core.suite.property import PropertySpec, validation_line
from gate.core.suite.suite import Suite, SuiteConfig
from gate.io.inputs import parse_problem, read_input

M = TypeVar("M", bound=BaseModel)


def load_suite(path: Path, *, repository: Path | None = None) -> Suite:
    """Read and validate gate.toml; every problem is one SuiteError naming the file and field.
    Every path it names must stay in `repository` (default: the git work tree holding gate.toml,
    else gate.toml's folder): the oracle comes from the suite's repository (from the base with
    --base), never from whatever the machine holds elsewhere."""
    raw_bytes = read_input(path, "suite file")
    try:
        raw = tomllib.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SuiteError(f"not valid TOML: not UTF-8 (bad byte at offset {exc.start})", file=str(path)) from None
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, or an int past the digit limit
        raise SuiteError(f"not valid TOML: {parse_problem(exc)}", file=str(path)) from None
    unknown = set(raw) - {"suite", "property"}
    if unknown:
        raise SuiteError(f"unknown table(s) {', '.join(sorted(unknown))}", file=str(path))
    config = _validate(SuiteConfig, raw.get("suite", {}), path, "suite")
    entries = raw.get("property", [])
    if not isinstance(entries, list) or not entries:
        raise SuiteError("no [[property]] entries", file=str(path), field="property")
    properties: list[PropertySpec] = []
    for index, entry in enumerate(entries):
        label = f"property[{index}]"
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            label = f"property {entry['id']}"
        if isinstance(entry, dict) and "band" not in entry:
            raise SuiteError("has no band; an unclassified property is refused", file=str(path), field=label)
        properties.append(_validate(PropertySpec, entry, path, label))
    seen: set[str] = set()
    for prop in properties:
        if prop.id in seen:
            raise SuiteError("duplicate property id", file=str(path), field=f"property {prop.id}")
        seen.add(prop.id)
    suite = Suite(
        path=path.resolve(),
        root=path.resolve().parent,
        sha256=hashlib.sha256(raw_bytes).hexdigest(),
        config=config,
        properties=tuple(properties),
    )
    _inside_repository(suite, path, repository or repository_of(suite.root))
    return suite


def repository_of(folder: Path) -> Path:
    """The git work tree holding `folder` (the nearest folder with a `.git`), else `folder` itself."""
    for candidate in (folder, *folder.parents):
        try:
            if (candidate / ".git").exists():
                return candidate
        except OSError:
            break
    return folder


def _inside_repository(suite: Suite, path: Path, repository: Path) -> None:
    """Refuse a path gate.toml names that leaves the repository, as written or through a link."""
    repo = os.path.normpath(repository.resolve())
    outside = suite.outside_repository(repo)
    if outside is None:
        for field, value in suite.named_paths():
            try:
                target = suite.resolve(value)  # follows links: one leading out is refused too
            except (OSError, RuntimeError):
                outside = (field, value)
                break
            if not target.is_relative_to(repo):
                outside = (field, value)
                break
    if outside is not None:
        field, value = outside
        raise SuiteError(
            f"{value!r} is outside the suite's repository {repo}: every path gate.toml names must stay"
            " in it (pass a file elsewhere on the command line instead)",
            file=str(path),
            field=field,
        )


def _validate(model: type[M], data: Any, path: Path, label: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(validation_line(exc), file=str(path), field=label) from None
