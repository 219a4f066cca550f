"""Stamping: the facts of one run, its verdicts and the policy's decision become the verdict card
and the JSON lines printed on stdout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from gate import __version__
from gate.core.card.card import Acceptance, DeadlineSource, FixtureBinding, HarnessEvent, PropertyRow, VerdictCard
from gate.core.policy.flakes import BaseRerun, FlakeFiles
from gate.core.policy.freezes import FreezeState
from gate.core.policy.policy import Decision, Vote
from gate.core.suite.property import PropertySpec
from gate.core.suite.seal import Seal
from gate.core.suite.suite import Suite
from gate.core.suite.trial import ClockSpec, Observation
from gate.core.trust.crosscheck_summary import CrossCheckSummary
from gate.core.verdicts.verdict import Verdict


@dataclass(frozen=True)
class Binding:
    """What the run was bound to before any trial: the suite and which of its properties ran, the trees,
    the seal, the clock, the base and the oracle files the patch edits."""

    suite: Suite
    workdir: Path
    fixture_root: Path
    seal: Seal
    clock: ClockSpec
    base: str | None
    oracle_edits: tuple[str, ...]
    # The suite as the user named it: with --base its text comes from a temporary checkout, whose
    # path would tell a reviewer nothing (the card's base_rev says where the text came from).
    suite_file: str = ""
    selection: tuple[str, ...] | None = None  # None: every property of the suite ran
    tree_digest: str = ""  # the patched tree's snapshot, once laid out


@dataclass(frozen=True)
class Venue:
    """Where and how the trials ran: the image, the work copy, the interpreter, and whose workers and
    seeds the run let in."""

    image: str = ""
    image_id: str = ""
    work_copy: str | None = None  # "overlay", "copy" or "mixed" (work_copy_facts)
    interpreter: str | None = None  # "fresh", "warm" or "mixed" (interpreter_facts)
    hash_seeds: int = 0  # distinct warm parents' PYTHONHASHSEEDs
    unenrolled_workers: bool = False  # over a broker without a worker registry (--allow-unenrolled-workers)
    seeds_from: str | None = None  # whose trial seeds the trials drew (--replay-seeds); None: the run's own


@dataclass(frozen=True)
class PerProperty:
    """What each card row carries beside its verdict, by property id."""

    deadline_sources: Mapping[str, DeadlineSource] = field(default_factory=dict)
    durations: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    workers: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # worker -> trials
    assigned: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # enrolled name -> trials
    base_reruns: Mapping[str, BaseRerun] = field(default_factory=dict)  # the row's rerun on the base


@dataclass(frozen=True)
class Trust:
    """How far the rows can be trusted: the freezes in force, the harness events, the evidence digest,
    the cross-checks, and the flake files and history the run wrote."""

    freezes: FreezeState
    events: tuple[HarnessEvent, ...] = ()
    evidence: str | None = None  # the digest over the run's trial records (gate.core.card.evidence)
    cross_check: CrossCheckSummary | None = None
    flake_files: FlakeFiles | None = None
    flake_history: str = ""  # what the run added to the flake history, or why nothing (gate.run.runhistory)


@dataclass(frozen=True)
class RunFacts:
    """Everything one run's card says besides its verdicts and decision, grouped by what it describes."""

    run_id: str
    started: datetime
    retries: int
    binding: Binding
    trust: Trust
    venue: Venue = field(default_factory=Venue)
    per_property: PerProperty = field(default_factory=PerProperty)


def stamp(facts: RunFacts, verdicts: Sequence[Verdict], decision: Decision) -> VerdictCard:
    """The verdict card for one run."""
    binding, venue, trust = facts.binding, facts.venue, facts.trust
    by_id = {p.id: p for p in binding.suite.properties}
    votes = {v.property_id: v for v in decision.votes}
    rows = tuple(_row(v, by_id[v.property_id], votes[v.property_id], facts.per_property) for v in verdicts)
    return VerdictCard(
        gate_version=__version__,
        run_id=facts.run_id,
        created_at=facts.started,
        suite=binding.suite_file or str(binding.suite.path),
        suite_sha256=binding.suite.sha256,
        workdir=str(binding.workdir.resolve()),
        tree_digest=binding.tree_digest,
        fixture=FixtureBinding(
            root=str(binding.fixture_root), seal=binding.seal.digest, manifest=binding.seal.manifest
        ),
        image=venue.image,
        image_id=venue.image_id,
        clock=binding.clock,
        unenrolled_workers=venue.unenrolled_workers,
        seeds_from=venue.seeds_from,
        work_copy=venue.work_copy,
        interpreter=venue.interpreter,
        hash_seeds=venue.hash_seeds,
        retry_count=facts.retries,
        base_rev=binding.base,
        new_oracle_edits=binding.oracle_edits,
        freeze_set=trust.freezes.frozen,
        freezes_inactive=trust.freezes.inactive,
        properties=rows,
        selection=binding.selection,
        ledger_actions=decision.ledger_actions,
        harness_events=trust.events,
        policy=decision.inputs,
        window_after=decision.window.recent,
        status=decision.status,
        exit_code=decision.exit_code,
        reasons=decision.reasons,
        evidence=trust.evidence,
        flake_files=trust.flake_files,
        flake_history=trust.flake_history,
        cross_check=trust.cross_check,
    )


def _row(v: Verdict, prop: PropertySpec, vote: Vote, per: PerProperty) -> PropertyRow:
    """One card row: the verdict, how it voted, and what the run measured of its property."""
    rule = prop.rule()
    return PropertyRow(
        id=v.property_id,
        band=v.band,
        kind=v.kind,
        voting=vote.voting,
        frozen_by=vote.frozen_by,
        ledger=vote.ledger,
        trials=v.trials,
        hits=v.hits,
        interval=v.interval,
        rule=rule.model_dump() if rule else None,
        deadline_s=prop.deadline_s,
        deadline_source=per.deadline_sources.get(v.property_id, DeadlineSource.PROPOSAL),
        timeout_is_safety=prop.timeout_is_safety,
        fixture=prop.fixture,
        fixture_digest=v.fixture_digest,
        detail=v.detail,
        durations_s=per.durations.get(v.property_id, ()),
        counts=v.counts,
        paired=v.paired,
        colour_change=v.colour_change,
        base_rerun=per.base_reruns.get(v.property_id),
        workers=dict(per.workers.get(v.property_id, {})),
        assigned=dict(per.assigned.get(v.property_id, {})),
    )


def work_copy_facts(observations: Iterable[Observation]) -> tuple[str | None, tuple[HarnessEvent, ...]]:
    """Which work copy the trials ran in ("overlay", "copy", "mixed", or None when none said), and one
    harness event per distinct reason copy mode ran where overlay was wanted."""
    modes: set[str] = set()
    notes: dict[str, None] = {}
    for obs in observations:
        if obs.work_copy is not None:
            modes.add(obs.work_copy.value)
            if obs.work_copy_note:
                notes[obs.work_copy_note] = None
    mode = modes.pop() if len(modes) == 1 else ("mixed" if modes else None)
    events = tuple(HarnessEvent(kind="work_copy", detail=f"copy mode: {note}"[:300]) for note in notes)
    return mode, events


def interpreter_facts(observations: Iterable[Observation]) -> tuple[str | None, int]:
    """Which interpreter mode the trials ran in ("fresh", "warm", "mixed", or None when none said), and
    how many distinct warm parents' hash seeds they saw."""
    modes: set[str] = set()
    seeds: set[int] = set()
    for obs in observations:
        if obs.interpreter is not None:
            modes.add(obs.interpreter.value)
        if obs.hash_seed is not None:
            seeds.add(obs.hash_seed)
    mode = modes.pop() if len(modes) == 1 else ("mixed" if modes else None)
    return mode, len(seeds)


def verdict_lines(card: VerdictCard, card_path: Path, acceptance: Acceptance) -> list[str]:
    """One JSON line per property, then the job's line: the stdout contract of `gate run`. The job
    line also says what `gate accept` will decide on this card and why, so there is one answer."""
    lines = [
        json.dumps(
            {
                "kind": row.kind,
                "property_id": row.id,
                "band": row.band,
                "fixture_digest": row.fixture_digest,
                "trials": row.trials,
                "hits": row.hits,
                "voting": row.voting,
                "detail": row.detail,
            }
        )
        for row in card.properties
    ]
    job = {"job": card.status, "exit_code": card.exit_code, "run_id": card.run_id, "card": str(card_path)}
    verdict = {"accepted": acceptance.accepted, "accept_reasons": list(acceptance.reasons)}
    lines.append(json.dumps({**job, "reasons": list(card.reasons), **verdict}))
    return lines
