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
from gate.core.policy.policy import Decision
from gate.core.suite.seal import Seal
from gate.core.suite.suite import Suite
from gate.core.suite.trial import ClockSpec, Observation
from gate.core.trust.crosscheck_summary import CrossCheckSummary
from gate.core.verdicts.verdict import Verdict


@dataclass(frozen=True)
class RunFacts:
    """What the run was bound to, gathered before and during execution."""

    run_id: str
    started: datetime
    suite: Suite
    workdir: Path
    fixture_root: Path
    seal: Seal
    clock: ClockSpec
    retries: int
    base: str | None
    oracle_edits: tuple[str, ...]
    freezes: FreezeState
    tree_digest: str = ""
    unenrolled_workers: bool = False  # over a broker without a worker registry (--allow-unenrolled-workers)
    seeds_from: str | None = None  # whose trial seeds the trials drew (--replay-seeds); None: the run's own
    image: str = ""
    image_id: str = ""
    events: tuple[HarnessEvent, ...] = ()
    durations: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    deadline_sources: Mapping[str, DeadlineSource] = field(default_factory=dict)
    selection: tuple[str, ...] | None = None  # None: every property of the suite ran
    evidence: str | None = None  # the digest over the run's trial records (gate.core.card.evidence)
    # The suite as the user named it: with --base its text comes from a temporary checkout, whose
    # path would tell a reviewer nothing (the card's base_rev says where the text came from).
    suite_file: str = ""
    base_reruns: Mapping[str, BaseRerun] = field(default_factory=dict)  # property id -> its rerun on the base
    flake_files: FlakeFiles | None = None
    work_copy: str | None = None  # "overlay", "copy" or "mixed" (work_copy_facts)
    interpreter: str | None = None  # "fresh", "warm" or "mixed" (interpreter_facts)
    hash_seeds: int = 0  # distinct warm parents' PYTHONHASHSEEDs
    flake_history: str = ""  # what the run added to the flake history, or why nothing (gate.run.runhistory)
    workers: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # property id -> worker -> trials
    assigned: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # property id -> enrolled name -> trials
    cross_check: CrossCheckSummary | None = None


def stamp(facts: RunFacts, verdicts: Sequence[Verdict], decision: Decision) -> VerdictCard:
    """The verdict card for one run."""
    by_id = {p.id: p for p in facts.suite.properties}
    votes = {v.property_id: v for v in decision.votes}
    rows = []
    for v in verdicts:
        prop, vote = by_id[v.property_id], votes[v.property_id]
        rule = prop.rule()
        rows.append(
            PropertyRow(
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
                deadline_source=facts.deadline_sources.get(v.property_id, DeadlineSource.PROPOSAL),
                timeout_is_safety=prop.timeout_is_safety,
                fixture=prop.fixture,
                fixture_digest=v.fixture_digest,
                detail=v.detail,
                durations_s=facts.durations.get(v.property_id, ()),
                counts=v.counts,
                paired=v.paired,
                colour_change=v.colour_change,
                base_rerun=facts.base_reruns.get(v.property_id),
                workers=dict(facts.workers.get(v.property_id, {})),
                assigned=dict(facts.assigned.get(v.property_id, {})),
            )
        )
    return VerdictCard(
        gate_version=__version__,
        run_id=facts.run_id,
        created_at=facts.started,
        suite=facts.suite_file or str(facts.suite.path),
        suite_sha256=facts.suite.sha256,
        workdir=str(facts.workdir.resolve()),
        tree_digest=facts.tree_digest,
        fixture=FixtureBinding(root=str(facts.fixture_root), seal=facts.seal.digest, manifest=facts.seal.manifest),
        image=facts.image,
        image_id=facts.image_id,
        clock=facts.clock,
        unenrolled_workers=facts.unenrolled_workers,
        seeds_from=facts.seeds_from,
        work_copy=facts.work_copy,
        interpreter=facts.interpreter,
        hash_seeds=facts.hash_seeds,
        retry_count=facts.retries,
        base_rev=facts.base,
        new_oracle_edits=facts.oracle_edits,
        freeze_set=facts.freezes.frozen,
        freezes_inactive=facts.freezes.inactive,
        properties=tuple(rows),
        selection=facts.selection,
        ledger_actions=decision.ledger_actions,
        harness_events=facts.events,
        policy=decision.inputs,
        window_after=decision.window.recent,
        status=decision.status,
        exit_code=decision.exit_code,
        reasons=decision.reasons,
        evidence=facts.evidence,
        flake_files=facts.flake_files,
        flake_history=facts.flake_history,
        cross_check=facts.cross_check,
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
