"""Flakes are established on the base, never on the patch: the decision after a base rerun.

A safety or contract row that changed colour on the patched tree proves nothing about flakiness by
itself: a patch that makes its own output nondeterministic would otherwise earn a freeze for the
very property that catches it. So the runner runs the same trials (same property, trial indices,
seal, image and clock) on the base revision's tree, and `judge_base` decides from what the base
showed: hits and misses both → a flake; all hits or all misses → steady on the base (the patch
made it flicker; no freeze is ever proposed). A base whose trials did not all come back as a hit or
a miss (a fault, a timeout) and did not flicker establishes nothing: `unobserved_on_base`.

The rerun never changes the run's decision: the patched tree's row still votes by its own kind.
Pure: outcomes in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from gate.core.escaping import one_line
from gate.core.verdicts.verdict import Band, ColourChange, Detail, Outcome, OutcomeKind, Verdict

MESSAGES = 3  # distinct check messages kept per side
MESSAGE_CHARS = 200  # each cut to this many characters
FLAKE_BANDS = (Band.SAFETY, Band.CONTRACT)


class RerunVerdict(StrEnum):
    FLAKE = "flake"  # the base flickered too: the property changes colour without a code change
    STEADY_ON_BASE = "steady_on_base"  # all hits or all misses on the base: the patch made it flicker
    UNOBSERVED_ON_BASE = "unobserved_on_base"  # a fault or timeout on the base, and no flicker: nothing shown


class BaseRerun(BaseModel):
    """What the same trials showed on the base tree, and what that makes of the patched row's flicker.
    The messages are the checks' (they quote probe output: data, escaped wherever shown)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    base_commit: str
    tree_digest: str  # the base tree's snapshot the trials ran from
    trials: int = Field(ge=0)
    hits: int = Field(ge=0)
    colour_change: ColourChange | None = None
    verdict: RerunVerdict
    patched_messages: tuple[Detail, ...] = ()
    base_messages: tuple[Detail, ...] = ()


class FlakeFiles(BaseModel):
    """What a run wrote beside its card about flakes: file names relative to the card's folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    freeze_proposal: str | None = None  # `{"freezes": [...]}`, entries with an owner to fill in
    repair_task: str | None = None  # Markdown: what to repair, with the run id, seal and trial indices
    freeze_ids: tuple[str, ...] = ()  # the freezes proposed (contract flakes only)
    broken_safety: tuple[str, ...] = ()  # safety properties that flicker on the base: fix, never freeze


def needs_rerun(verdict: Verdict) -> bool:
    """Whether `verdict`'s row changed colour in a band where only the base can say it is a flake."""
    return verdict.band in FLAKE_BANDS and verdict.colour_change is not None


def judge_base(
    band: Band,
    base_outcomes: Sequence[Outcome],
    *,
    base_commit: str,
    tree_digest: str,
    planned: int,
    patched_outcomes: Sequence[Outcome] = (),
) -> BaseRerun:
    """The base rerun's verdict from its judged trials (`planned` were dispatched): a flake only when
    the base's own trials disagree on the same sealed bytes (`ColourChange.of`); steady only when every
    planned trial came back a hit or a miss. `patched_outcomes` give the patched side's messages."""
    change = ColourChange.of(band, base_outcomes)
    judged = [o for o in base_outcomes if o.kind in (OutcomeKind.HIT, OutcomeKind.MISS)]
    observed = planned > 0 and len(judged) == len(base_outcomes) == planned
    if change is not None:
        verdict = RerunVerdict.FLAKE
    elif observed:
        verdict = RerunVerdict.STEADY_ON_BASE
    else:
        verdict = RerunVerdict.UNOBSERVED_ON_BASE
    return BaseRerun(
        base_commit=base_commit,
        tree_digest=tree_digest,
        trials=len(base_outcomes),
        hits=sum(1 for o in base_outcomes if o.kind is OutcomeKind.HIT),
        colour_change=change,
        verdict=verdict,
        patched_messages=messages(patched_outcomes),
        base_messages=messages(base_outcomes),
    )


def messages(outcomes: Sequence[Outcome]) -> tuple[str, ...]:
    """The first few distinct miss/fault/timeout messages, in trial order, each on one line and cut short."""
    seen: dict[str, int] = {}  # message -> first trial that said it
    for o in sorted(outcomes, key=lambda o: o.trial_index):
        if o.kind is OutcomeKind.HIT or not o.detail:
            continue
        text = one_line(o.detail)
        seen.setdefault(text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…", o.trial_index)
        if len(seen) == MESSAGES:
            break
    return tuple(f"trial {index}: {text}" for text, index in seen.items())


def rerun_line(rerun: BaseRerun) -> str:
    """One line for a report: what the base showed, e.g. `base rerun on 1a2b3c4d5e6f: flake (2/4 hits)`."""
    shown = f"base rerun on {rerun.base_commit[:12]}: {rerun.verdict} ({rerun.hits}/{rerun.trials} hits)"
    return f"{shown}; {rerun.colour_change.line()}" if rerun.colour_change else shown


def flake_note(band: Band, rerun: BaseRerun | None) -> str:
    """What a report says of a row that changed colour: its base rerun and what came of it."""
    if rerun is None:
        return "not rerun on the base (no --base, or the rerun failed: see the harness events)"
    if rerun.verdict is not RerunVerdict.FLAKE:
        return rerun_line(rerun)
    if band is Band.SAFETY:
        return f"{rerun_line(rerun)}; a broken safety property: fix it, it is never frozen"
    return f"{rerun_line(rerun)}; freeze proposed (no owner yet: it freezes nothing until someone takes it)"


def files_line(files: FlakeFiles) -> str:
    """What the run wrote beside its card about flakes, in one line."""
    parts = []
    if files.freeze_proposal:
        parts.append(f"{files.freeze_proposal} (proposes {', '.join(files.freeze_ids)}; owner to fill in)")
    if files.repair_task:
        parts.append(files.repair_task)
    line = "written beside the card: " + ", ".join(parts)
    return line + (f"; broken safety: {', '.join(files.broken_safety)}" if files.broken_safety else "")
