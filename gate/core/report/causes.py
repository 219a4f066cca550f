"""What a freeze proposal and a repair task say of a flake's measured cause, and which flakes share
one: properties explained by the same source are one finding (fix the cause once, clear them all), and
nightly flakes that failed in the same run are listed together."""

from __future__ import annotations

from collections.abc import Sequence

from gate.core.policy.explain import Explanation
from gate.core.policy.freezes import FreezeFile
from gate.core.policy.history import PairFlake
from gate.core.policy.sources import Source
from gate.core.policy.words import named
from gate.core.report.markdown import md_code, md_inline
from gate.core.verdicts.verdict import Kind

# Causes the probe or the code can remove: a freeze for one of them buys time for a fix, not a reprieve.
FIXABLE = frozenset({Source.TRIAL_SEED.value, Source.HASH_SEED.value})


def cause_of(explanation: Explanation | None) -> str:
    """The cause in a few words for a freeze reason: `cause hash_seed (fixable in the probe or the code): …`."""
    if explanation is None:
        return "cause not explained (no explanation ran)"
    if not named(explanation):
        return f"cause not explained ({explanation.finding}: {explanation.words})"
    return f"cause {explanation.source}{_fixable(explanation)}: {explanation.words}"


def _fixable(explanation: Explanation) -> str:
    return " (fixable in the probe or the code)" if set(explanation.source.split("+")) <= FIXABLE else ""


def measured(explanation: Explanation | None) -> str:
    """The source a freeze entry records as its cause ("" when none was named)."""
    return explanation.source if explanation is not None and named(explanation) else ""


def suite_causes(freezes: FreezeFile | None, causes: Sequence[Explanation]) -> dict[str, tuple[str, ...]]:
    """Every measured cause across the suite, with the properties it moves: the freeze file's entries that
    record one, and the flakes just explained (one cause per property: the newest measurement wins)."""
    by_property: dict[str, str] = {}
    for entry in freezes.freezes if freezes is not None else ():
        for pid in entry.properties:
            if entry.cause:
                by_property[pid] = entry.cause
    by_property.update({e.property_id: e.source for e in causes if named(e)})
    grouped: dict[str, list[str]] = {}
    for pid, cause in sorted(by_property.items()):
        grouped.setdefault(cause, []).append(pid)
    return {cause: tuple(ids) for cause, ids in sorted(grouped.items())}


def shared(causes: Sequence[Explanation]) -> dict[str, tuple[str, ...]]:
    """Sources that explain more than one property, with those properties (in the order given)."""
    groups: dict[str, list[str]] = {}
    for explanation in causes:
        if named(explanation):
            groups.setdefault(explanation.source, []).append(explanation.property_id)
    return {source: tuple(ids) for source, ids in groups.items() if len(ids) > 1}


def shared_lines(causes: Sequence[Explanation]) -> list[str]:
    """A repair task's "Shared causes" section (empty when no two flakes share one)."""
    groups = shared(causes)
    if not groups:
        return []
    lines = ["## Shared causes", ""]
    for source, ids in groups.items():
        words = next(e.words for e in causes if e.source == source)
        listed = ", ".join(md_code(pid) for pid in ids)
        lines.append(f"- {md_code(source)} moves {listed}: fix it once. {md_inline(words)}")
    return [*lines, ""]


def failed_together(flakes: Sequence[PairFlake]) -> dict[str, tuple[str, ...]]:
    """Nightly flakes that passed in one run of the pair and failed in the other, by the run they failed in
    (only runs where more than one failed): failures that fall on the same trials may share a cause."""
    runs: dict[str, list[str]] = {}
    for flake in flakes:
        passed = [entry.kind is Kind.PASS for entry in (flake.first, flake.second)]
        if passed.count(True) == 1:
            failed = flake.second if passed[0] else flake.first
            runs.setdefault(failed.run_id, []).append(flake.property_id)
    return {run_id: tuple(ids) for run_id, ids in runs.items() if len(ids) > 1}


def together_lines(flakes: Sequence[PairFlake], causes: Sequence[Explanation]) -> list[str]:
    """A repair task's "Failed in the same run" section: flakes no measured source explains, grouped by
    the run they failed in (one with a named cause is under it, and under Shared causes)."""
    explained = {e.property_id for e in causes if named(e)}
    lines = []
    for run_id, ids in failed_together([f for f in flakes if f.property_id not in explained]).items():
        listed = ", ".join(md_code(pid) for pid in ids)
        lines.append(f"- run {md_code(run_id)}: {listed} failed together and passed together in the other run.")
    if not lines:
        return []
    return ["## Failed in the same run", "", *lines, "",
            "Failures on the same trials may share a cause no source names: what that run shared (the machine,",
            "its load, a resource outside the sandbox).", ""]  # fmt: skip


def cause_lines(explanation: Explanation | None, causes: Sequence[Explanation]) -> list[str]:
    """The lines a repair task's section on one flake gives its cause."""
    if explanation is None:
        return []
    if not named(explanation):
        return [f"- Cause: not explained ({md_inline(explanation.words)})"]
    others = [pid for pid in shared(causes).get(explanation.source, ()) if pid != explanation.property_id]
    also = f", shared with {', '.join(md_code(p) for p in others)} (see Shared causes)" if others else ""
    return [
        f"- Cause: {md_code(explanation.source)}{_fixable(explanation)}{also}, measured in"
        f" {explanation.trials} trials: {md_inline(explanation.words)}"
    ]
