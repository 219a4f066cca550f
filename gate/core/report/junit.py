"""The verdict card as JUnit XML, for CI test tabs: one testsuite, one testcase per property.

Pure: card in, bytes out. Details and reasons quote the patch's output, so every string is made
XML-1.0-safe before it reaches ElementTree, which writes characters XML cannot carry without
complaint (and a reader then refuses the whole file).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gate.core.card.card import PropertyRow, VerdictCard
from gate.core.escaping import escaped
from gate.core.verdicts.verdict import Kind

# Kinds that are the patch's failure or a gap in the evidence: both are <failure>, never skipped
# or passed, so a CI view can never show an unproven property as green.
_FAILURES = frozenset({Kind.FAIL_SAFETY, Kind.FAIL_CONTRACT, Kind.INCONCLUSIVE_TIMEOUT, Kind.INCONCLUSIVE_SAMPLE})
_MESSAGE_CHARS = 500  # the attribute is a one-line headline; the element's text keeps the whole detail


def xml_text(text: str) -> str:
    """`text` with every character XML 1.0 cannot carry (NUL, other C0 controls, lone surrogates,
    U+FFFE/U+FFFF), and the discouraged C1 controls, written as visible \\xNN / \\uNNNN escapes."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if char in "\t\n\r" or 0x20 <= code < 0x7F or 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD:
            out.append(char)
        elif code >= 0x10000:
            out.append(char)  # astral characters are legal XML
        else:
            out.append(escaped(char))
    return "".join(out)


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    """A child element whose attributes and text have passed `xml_text` (the one way in)."""
    element = ET.SubElement(parent, tag, {key: xml_text(value) for key, value in attrs.items()})
    if text is not None:
        element.text = xml_text(text)
    return element


def _seconds(durations: tuple[float, ...]) -> str:
    return f"{sum(durations):.3f}"


def _headline(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


def _testcase(suite: ET.Element, row: PropertyRow) -> None:
    attrs = {"classname": str(row.band), "name": row.id}
    if row.durations_s:
        attrs["time"] = _seconds(row.durations_s)
    case = _sub(suite, "testcase", **attrs)
    # Whether the row voted travels with every case: a frozen property keeps its kind (a frozen
    # failure is still red) and says here that it did not count.
    props = _sub(case, "properties")
    _sub(props, "property", name="kind", value=str(row.kind))
    _sub(props, "property", name="voting", value="true" if row.voting else "false")
    _sub(props, "property", name="trials", value=str(row.trials))
    _sub(props, "property", name="hits", value=str(row.hits))
    if row.frozen_by is not None:
        _sub(props, "property", name="frozen_by", value=row.frozen_by)
    if row.ledger is not None:
        _sub(props, "property", name="ledger", value=str(row.ledger))
    if row.kind is Kind.PASS:
        return
    detail = row.detail or str(row.kind)
    body = f"{row.kind}: {row.hits}/{row.trials} trials held" + (f"\n{row.detail}" if row.detail else "")
    if not row.voting:
        body += f"\n(did not vote: {row.frozen_by or row.ledger or 'no vote'})"
    tag = "failure" if row.kind in _FAILURES else "error"  # harness_error: the gate's fault, not the patch's
    _sub(case, tag, body, type=str(row.kind), message=_headline(detail))


def render_junit(card: VerdictCard) -> bytes:
    """The card as a JUnit XML document (UTF-8, with declaration): `<testsuites>` holding one `<testsuite>`
    named after the card's suite file, the job's status and exit code as its properties."""
    failures = sum(1 for row in card.properties if row.kind in _FAILURES)
    errors = sum(1 for row in card.properties if row.kind is Kind.HARNESS_ERROR)
    counts = {"tests": str(len(card.properties)), "failures": str(failures), "errors": str(errors), "skipped": "0"}
    durations = tuple(d for row in card.properties for d in row.durations_s)
    root = ET.Element("testsuites", {"name": "probegate", **counts, "time": _seconds(durations)})
    suite = _sub(
        root,
        "testsuite",
        name=card.suite,
        timestamp=card.created_at.isoformat(),
        time=_seconds(durations),
        **counts,
    )
    props = _sub(suite, "properties")
    _sub(props, "property", name="job_status", value=str(card.status))
    _sub(props, "property", name="exit_code", value=str(card.exit_code))
    _sub(props, "property", name="run_id", value=card.run_id)
    _sub(props, "property", name="gate_version", value=card.gate_version)
    _sub(props, "property", name="seal", value=card.fixture.seal)
    _sub(props, "property", name="image_id", value=card.image_id)
    _sub(props, "property", name="retry_count", value=str(card.retry_count))
    for reason in card.reasons:
        _sub(props, "property", name="reason", value=reason)
    for row in card.properties:
        _testcase(suite, row)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
