"""The run journal's pure part: what binds a stored observation to one run, and the checks a resume
applies before it reuses any of them. The file itself is `gate.io.journal`; the executor that fills and
replays it is `gate.run.executors.journaled`.

A journal is JSON lines: a header naming the run (run id, suite and checks digests, tree, seal, image,
the properties run), one line per observed trial (its key, its spec's digest, its canary, the
observation as the executor returned it; a paired property's base-side trial also names its side),
and, once the run reaches its commit, a commit line. Every line carries `chain`, the sha256 of the
previous line's chain and its own canonical body, so a line edited, dropped, reordered or spliced in
from another journal breaks the chain from there on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from gate.core.errors import JournalError
from gate.core.suite.trial import Observation, Side, TrialKey, TrialSpec

JOURNAL_FORMAT = "probegate/run-journal/v1"
_FROZEN = ConfigDict(frozen=True, extra="forbid")
Key = TrialKey


class JournalHeader(BaseModel):
    """What a journal is bound to: every field must equal the resumed run's own."""

    model_config = _FROZEN
    format: str = JOURNAL_FORMAT
    run_id: str
    suite: str  # sha256 of gate.toml as read (from the base with --base)
    checks: str  # sha256 of the checks module ("" when every check is builtin)
    tree: str  # the patched tree's digest, as laid out for the sandbox
    seal: str  # the fixture seal's digest
    image: str  # the image tag trials were routed to
    image_id: str  # the image ID the run resolved
    properties: tuple[str, ...]  # the properties the run covers, in suite order


@dataclass(frozen=True)
class Stored:
    """One reusable trial: the canary its spec carried and the observation the executor returned."""

    spec_digest: str
    canary: str
    observation: Observation


@dataclass(frozen=True)
class Journal:
    """A journal as read: its header, the trials stored by key, the last chain, whether it reached its commit."""

    header: JournalHeader
    stored: Mapping[Key, Stored]
    chain: str
    committed: bool


def canonical(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the one encoding chained and digested."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def spec_digest(spec: TrialSpec) -> str:
    """sha256 of a trial spec in canonical JSON (its canary included)."""
    return hashlib.sha256(canonical(spec.model_dump(mode="json"))).hexdigest()


def chained(previous: str, body: Mapping[str, Any]) -> str:
    """The chain value of a line with `body` after a line whose chain is `previous`."""
    return hashlib.sha256(previous.encode() + b"\n" + canonical(dict(body))).hexdigest()


def header_line(header: JournalHeader) -> dict[str, Any]:
    body = header.model_dump(mode="json")
    return {**body, "chain": chained("", body)}


def trial_line(previous: str, spec: TrialSpec, observation: Observation) -> dict[str, Any]:
    """The line storing `observation` of `spec`'s trial, chained after `previous`."""
    body = {
        "property": spec.property_id,
        "index": spec.trial_index,
        "spec": spec_digest(spec),
        "canary": spec.canary,
        "observation": observation.model_dump(mode="json"),
    }
    if spec.side is not Side.PATCH:  # a patch trial's line is as it was before trials had sides
        body["side"] = spec.side.value
    return {**body, "chain": chained(previous, body)}


def commit_line(previous: str) -> dict[str, Any]:
    body = {"commit": True}
    return {**body, "chain": chained(previous, body)}


def parse_lines(lines: Sequence[Mapping[str, Any]]) -> Journal:
    """A journal from its parsed lines (the torn last line, if any, already dropped); a broken chain, a
    malformed line, a line after the commit or a trial stored twice raises JournalError naming the line."""
    if not lines:
        raise JournalError("empty: no header line")
    first = dict(lines[0])
    chain = first.pop("chain", None)
    try:
        header = JournalHeader.model_validate(first)
    except ValueError as exc:
        raise JournalError(f"line 1: not a run journal header: {_first_error(exc)}") from None
    if header.format != JOURNAL_FORMAT:
        raise JournalError(f"line 1: format {header.format!r} is not {JOURNAL_FORMAT!r}")
    if chain != _chained_line(1, "", first):
        raise JournalError("line 1: the header was edited (its chain does not match)")
    stored: dict[Key, Stored] = {}
    committed = False
    for number, raw in enumerate(lines[1:], start=2):
        body = dict(raw)
        given = body.pop("chain", None)
        if given != _chained_line(number, chain, body):
            raise JournalError(f"line {number}: does not follow from the lines before it (edited, reordered or added)")
        chain = given
        if committed:
            raise JournalError(f"line {number}: comes after the commit line")
        if body == {"commit": True}:
            committed = True
            continue
        key, entry = _trial(number, body, header.run_id)
        if key in stored:
            raise JournalError(f"line {number}: {_named(key)} is stored twice")
        stored[key] = entry
    return Journal(header=header, stored=stored, chain=chain, committed=committed)


def _chained_line(number: int, previous: str, body: Mapping[str, Any]) -> str:
    try:
        return chained(previous, body)
    except UnicodeEncodeError:  # JSON's "\ud800" parses to a lone surrogate, which no file can hold
        raise JournalError(f"line {number}: holds text that cannot be written back (a lone surrogate)") from None


def _trial(number: int, body: Mapping[str, Any], run_id: str) -> tuple[Key, Stored]:
    if set(body) - {"side"} != {"property", "index", "spec", "canary", "observation"}:
        raise JournalError(f"line {number}: not a trial line (fields {sorted(body)})")
    prop, index, digest, canary = body["property"], body["index"], body["spec"], body["canary"]
    if not (isinstance(prop, str) and type(index) is int and isinstance(digest, str) and isinstance(canary, str)):
        raise JournalError(f"line {number}: property, index, spec or canary has the wrong type")
    if body.get("side", Side.BASE.value) != Side.BASE.value:
        raise JournalError(f"line {number}: side {body['side']!r} is not 'base' (a patch trial's line names none)")
    side = Side.BASE if "side" in body else Side.PATCH
    try:
        # Bytes travel as base64 in JSON: validated from JSON text, as the card's observations are.
        observation = Observation.model_validate_json(canonical(body["observation"]))
    except ValueError as exc:
        raise JournalError(f"line {number}: not an observation: {_first_error(exc)}") from None
    key = (run_id, prop, index, side)
    if observation.key != key:
        raise JournalError(f"line {number}: the observation is of {observation.key}, the line of {key}")
    return key, Stored(spec_digest=digest, canary=canary, observation=observation)


def mismatch(stored: JournalHeader, expected: JournalHeader, *, image: bool = True) -> str | None:
    """What differs between a journal's header and the run being resumed, in a few words; None when
    nothing does. `image` False: the image is compared later (it is known once the executor says)."""
    skip = set() if image else {"image", "image_id"}
    names = {"run_id": "run", "suite": "suite", "checks": "checks module", "tree": "patched tree"}
    names |= {"seal": "fixture seal", "image": "image", "image_id": "image ID", "properties": "properties"}
    for field, name in names.items():
        if field in skip:
            continue
        have, want = getattr(stored, field), getattr(expected, field)
        if have != want:
            verb = "are" if field == "properties" else "is"
            return f"its {name} {verb} {_short(have)}, this run's {verb} {_short(want)}"
    return None


def check_trials(journal: Journal, spec_of: Callable[[str, int, str, Side], TrialSpec | None]) -> None:
    """Refuse any stored trial that is not one of this run's specs: `spec_of(property, index, canary, side)`
    is the spec this run plans for that trial with the stored canary (None: the run plans no such trial)."""
    for key, entry in journal.stored.items():
        _, prop, index, side = key
        spec = spec_of(prop, index, entry.canary, side)
        if spec is None:
            raise JournalError(f"{_named(key)} is not a trial of this run")
        if spec_digest(spec) != entry.spec_digest:
            raise JournalError(f"{_named(key)} was stored for another spec than this run's")


def _named(key: Key) -> str:
    """`p trial 3`, or `p base trial 3` for a paired property's base side."""
    _, prop, index, side = key
    return f"{prop} base trial {index}" if side is Side.BASE else f"{prop} trial {index}"


def _short(value: object) -> str:
    text = ",".join(value) if isinstance(value, tuple) else str(value)
    return repr(text[:16] + "…" if len(text) > 16 and isinstance(value, str) else text)


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(exc)
