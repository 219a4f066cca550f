"""Rerunning a flicker on the base: for each safety or contract row that changed colour on the patched
tree, the same trials (same property, trial indices, seal, image and clock, within the same run and
through the same executor) run on the base revision's version of the work folder, and
`gate.core.policy.flakes.judge_base` decides whether the base flickers too.

Only the base tree can show a flake: a patch that makes its own output nondeterministic must not earn
a freeze. Without --base there is no base tree, so nothing is rerun and a harness event says so. The
rerun's trial records are not put in the evidence store: that store's records of a run are the ones
the card's rows were folded from (`gate refold` re-derives the rows from them), and these are not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import structlog

from gate.core.card.card import HarnessEvent
from gate.core.card.evidence import TrialRecord
from gate.core.card.stamp import RunFacts
from gate.core.errors import GateError
from gate.core.policy.flakes import BaseRerun, judge_base, needs_rerun
from gate.core.report.proposals import flake_files
from gate.core.verdicts.verdict import Outcome, Verdict
from gate.io.checkproc import TrialJudge
from gate.io.gitbase import base_tree
from gate.io.snapshot import LocalInputs
from gate.io.treeselect import TreeSelection
from gate.run.executors.base import Executor
from gate.run.judged import judged
from gate.run.oracle import Oracle
from gate.run.trials import planner_for

log = structlog.get_logger("gate.run")

NO_BASE = "no base to rerun on (run without --base): the flicker is reported, not established as a flake"


def with_base_reruns(
    executor: Executor,
    facts: RunFacts,
    verdicts: Sequence[Verdict],
    records: Sequence[TrialRecord],
    *,
    oracle: Oracle,
    selection: TreeSelection,
    fixtures: Mapping[str, bytes],
    checks: TrialJudge,
) -> RunFacts:
    """`facts` with the base reruns of the rows that changed colour, their harness events, and the
    flake files the run will write beside its card."""
    reruns, events = rerun_on_base(
        executor,
        facts,
        verdicts,
        records,
        base_workdir=oracle.base_workdir,
        selection=selection,
        overrides=oracle.overrides,
        checks=checks,
        fixtures=fixtures,
    )
    return replace(
        facts,
        per_property=replace(facts.per_property, base_reruns=reruns),
        trust=replace(
            facts.trust,
            events=(*facts.trust.events, *events),
            flake_files=flake_files(verdicts, reruns, facts.binding.seal.digest),
        ),
    )


def rerun_on_base(
    executor: Executor,
    facts: RunFacts,
    verdicts: Sequence[Verdict],
    records: Sequence[TrialRecord],
    *,
    base_workdir: Path | None,
    selection: TreeSelection,
    overrides: Mapping[str, bytes],
    checks: TrialJudge,
    fixtures: Mapping[str, bytes],
) -> tuple[dict[str, BaseRerun], list[HarnessEvent]]:
    """The base reruns of the rows that changed colour, by property id, and the harness events of the
    rerun (no base, a base tree that cannot be laid out, an executor that failed): a row without a
    rerun keeps `base_rerun: null`, and the event says why."""
    flickered = [v for v in verdicts if needs_rerun(v)]
    if not flickered:
        return {}, []
    if base_workdir is None or facts.binding.base is None:
        return {}, [HarnessEvent(kind="no_base_rerun", property_id=v.property_id, detail=NO_BASE) for v in flickered]
    suite = facts.binding.suite
    by_id = {p.id: p for p in suite.properties}
    try:
        tree = base_tree(base_workdir, selection)
        inputs = LocalInputs(base_workdir, fixtures, tree=tree, overrides=overrides, limits=suite.config.limits)
    except GateError as exc:
        return {}, _failed(flickered, f"the base tree could not be laid out: {exc}")
    with inputs:
        planner = planner_for(facts, inputs.tree_digest)
        props = [by_id[v.property_id] for v in flickered]
        specs = [spec for prop in props for spec in planner.trials(prop, 0, prop.planned_trials())]
        seen_events = len(executor.events)
        log.info("rerun.start", run_id=facts.run_id, properties=[p.id for p in props], trials=len(specs))
        try:
            outcomes = judged(
                executor,
                specs,
                inputs,
                props=by_id,
                fixtures=fixtures,
                manifest=facts.binding.seal.manifest,
                clock=facts.binding.clock,
                checks=checks,
            )
        except GateError as exc:
            return {}, _failed(flickered, f"the executor failed during the base rerun: {exc}")
        events = [e.model_copy(update={"detail": f"base rerun: {e.detail}"}) for e in executor.events[seen_events:]]
        tree_digest = inputs.tree_digest
    patched: dict[str, list[Outcome]] = {}
    for record in records:
        patched.setdefault(record.property_id, []).append(record.outcome)
    reruns = {
        prop.id: judge_base(
            prop.band,
            [outcomes[prop.id][i] for i in sorted(outcomes[prop.id])],
            base_commit=facts.binding.base,
            tree_digest=tree_digest,
            planned=prop.planned_trials(),
            patched_outcomes=patched.get(prop.id, []),
        )
        for prop in props
    }
    return reruns, events


def _failed(flickered: Sequence[Verdict], detail: str) -> list[HarnessEvent]:
    return [HarnessEvent(kind="base_rerun_failed", property_id=v.property_id, detail=detail[:300]) for v in flickered]
