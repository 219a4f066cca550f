"""Which of the suite's properties a run covers: `gate run --property ID` (exact, repeatable) and
`-k EXPR` (a substring of the id, or a glob when it holds `*`, `?` or `[`). A property is selected
when any of them picks it. A card from a selection is recorded as such, and `accept` refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from gate.core.errors import UsageError

# Property ids are short; a longer -k is refused before fnmatch, whose translation of a pattern is
# quadratic in its '[' (50,000 of them ran for over a minute).
MAX_KEYWORD = 256


def select_ids(ids: Sequence[str], *, exact: Sequence[str] = (), keyword: str | None = None) -> tuple[str, ...] | None:
    """The selected ids in suite order, or None for the whole suite (no flag, or every property picked)."""
    if not exact and keyword is None:
        return None
    if keyword is not None and len(keyword) > MAX_KEYWORD:
        raise UsageError(f"longer than {MAX_KEYWORD} characters ({len(keyword)}); no property id is", field="-k")
    unknown = [pid for pid in exact if pid not in ids]
    if unknown:
        raise UsageError(f"the suite has no property {', '.join(unknown)}", field="--property")
    chosen = tuple(pid for pid in ids if pid in exact or (keyword is not None and _matches(pid, keyword)))
    if not chosen:
        raise UsageError(f"no property id matches {keyword!r}", field="-k")
    return None if len(chosen) == len(ids) else chosen


def _matches(pid: str, keyword: str) -> bool:
    return fnmatchcase(pid, keyword) if any(c in keyword for c in "*?[") else keyword in pid
