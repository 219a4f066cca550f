"""Executing one run's trials: plan, dispatch through the executor in waves, judge each observation
against the base's checks, keep every judged trial as a record, and fold the tallies into verdicts.
A sandbox that cannot start, or an executor that fails outright, makes every property a harness_error.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

from gate.core.card.card import DeadlineSource, HarnessEvent
from gate.core.card.evidence import TrialRecord
from gate.core.card.stamp import RunFacts, interpreter_facts, work_copy_facts
from gate.core.checks import Trial
from gate.core.errors import HarnessError, UsageError
from gate.core.suite.fold import Tally, fold_tallies
from gate.core.suite.plan import Planner
from gate.core.suite.property import PropertySpec
from gate.core.suite.suite import Suite
from gate.core.suite.trial import Observation, Side, TrialKey, TrialSpec
from gate.core.trust.crosscheck_summary import CrossCheckSummary
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import Outcome, Verdict, harness_verdict
from gate.io.checkproc import TrialJudge
from gate.io.snapshot import LocalInputs
from gate.run.crosscheck import cross_check, new_seed
from gate.run.executors.base import Executor, serves_every_tree
from gate.run.progress import Progress
from gate.run.waves import run_waves


def execute(
    executor: Executor,
    facts: RunFacts,
    inputs: LocalInputs,
    checks: TrialJudge,
    fixtures: Mapping[str, bytes],
    progress: Progress,
    records: list[TrialRecord],
    *,
    cross_check_share: float | None = None,
    stored_canary: Callable[[str, int, Side], str | None] | None = None,
    base_tree_digest: str | None = None,
) -> tuple[Sequence[Verdict], RunFacts]:
    """Plan, dispatch through the executor, cross-check and fold; a sandbox that cannot start fails every
    property. Every judged trial is appended to `records`. `cross_check_share` None: the suite's.
    `checks` judges each observation (the run's check process, `gate.io.checkproc`); `stored_canary`: a
    resumed run's canaries of the trials its journal holds (gate.run.executors.journaled); `base_tree_digest`: the base
    tree `inputs` also serves, on which paired properties run their other side (None: no --base)."""
    suite, manifest = facts.binding.suite, facts.binding.seal.manifest
    _check_base_served(executor, suite, base_tree_digest)
    venue = replace(facts.venue, image=executor.image)
    try:
        venue = replace(venue, image_id=executor.image_id())
    except HarnessError as exc:
        return all_harness(suite, manifest, str(exc)), replace(facts, venue=venue)
    facts = replace(facts, venue=venue)
    planner, base_planner = _planners(facts, inputs.tree_digest, base_tree_digest, stored_canary)

    def judge_one(prop: PropertySpec, obs: Observation) -> Outcome:
        trial = Trial(obs, fixtures[manifest[prop.fixture]], prop.params, facts.binding.clock)
        return checks.judge(prop.id, trial, prop.band)

    events: list[HarnessEvent] = []
    sent: dict[TrialKey, TrialSpec] = {}
    share = suite.config.cross_check if cross_check_share is None else cross_check_share
    try:
        tallies = run_waves(
            executor,
            suite.properties,
            planner=planner,
            inputs=inputs,
            judge=judge_one,
            events=events,
            progress=progress,
            sent=sent,
            base_planner=base_planner,
        )
        escape = suite.config.replay_escape
        checked = cross_check(executor, tallies, sent, inputs, judge_one, share=share, seed=new_seed(), escape=escape)
    except HarnessError as exc:
        # An executor that raises instead of reporting faults per trial (daemon or broker gone mid-run):
        # every property is a harness_error, and the card is still written.
        events.append(HarnessEvent(kind="executor_failed", detail=str(exc)[:300]))
        trust = replace(facts.trust, events=tuple(events))
        return all_harness(suite, manifest, f"executor failed: {exc}"), replace(facts, trust=trust)
    events.extend(executor.events)
    events.extend(checked.events)
    records.extend(_records(tallies))
    return _folded(executor, facts, tallies, events, workers=checked.workers, cross_checks=checked.summary)


def _check_base_served(executor: Executor, suite: Suite, base_tree_digest: str | None) -> None:
    """Refuse, before any trial, a run with a base tree on an executor that lays out the patched tree only:
    it would fault every base trial."""
    if base_tree_digest is not None and not serves_every_tree(executor):
        paired = next(p.id for p in suite.properties if isinstance(p.rule(), PairedRule))
        raise UsageError(
            f'property {paired} uses rule = "paired", which runs the base tree too: this executor lays out the'
            " patched tree only",
            field="--broker",
        )


def _planners(
    facts: RunFacts,
    tree_digest: str,
    base_tree_digest: str | None,
    stored_canary: Callable[[str, int, Side], str | None] | None,
) -> tuple[Planner, Planner | None]:
    """The patched tree's planner, and the base tree's for paired properties' other side (None: no base tree)."""
    planner = planner_for(facts, tree_digest, stored_canary=stored_canary)
    if base_tree_digest is None:
        return planner, None
    return planner, replace(planner_for(facts, base_tree_digest, stored_canary=stored_canary), side=Side.BASE)


def _records(tallies: Sequence[Tally]) -> Iterator[TrialRecord]:
    """Every judged trial as a record; a paired property's base trials beside the patch's (their
    observations name the side)."""
    for t in tallies:
        for o, outcome in (
            *zip(t.observations, t.outcomes, strict=True),
            *zip(t.base_observations, t.base_outcomes, strict=True),
        ):
            yield TrialRecord(property_id=t.prop.id, trial_index=o.trial_index, observation=o, outcome=outcome)


def _folded(
    executor: Executor,
    facts: RunFacts,
    tallies: Sequence[Tally],
    events: list[HarnessEvent],
    *,
    workers: Mapping[str, Mapping[str, int]],
    cross_checks: CrossCheckSummary | None,
) -> tuple[Sequence[Verdict], RunFacts]:
    """The stage that folds the tallies into verdicts and records where and how the trials ran: the images,
    work copies and interpreters the observations name, durations, workers and the cross-checks."""
    observed = [o for t in tallies for o in (*t.observations, *t.base_observations)]
    images = sorted({o.image_id for o in observed if o.image_id})
    if len(images) > 1:
        events.append(HarnessEvent(kind="mixed_images", detail=f"trials ran in {len(images)} images: {images}"))
    work_copy, copy_events = work_copy_facts(observed)
    events.extend(copy_events)
    interpreter, hash_seeds = interpreter_facts(o for t in tallies for o in t.observations)
    sources = facts.per_property.deadline_sources
    calibrated = frozenset(p for p, s in sources.items() if s is DeadlineSource.CALIBRATED)
    folded = fold_tallies(tallies, facts.binding.seal.manifest, calibrated=calibrated)
    image_id = facts.venue.image_id or (images[0] if len(images) == 1 else ",".join(images))
    venue = replace(facts.venue, image_id=image_id, work_copy=work_copy, interpreter=interpreter, hash_seeds=hash_seeds)
    per_property = replace(
        facts.per_property,
        durations=folded.durations,
        workers=workers,
        assigned=assigned_trials(executor, facts.run_id),
    )
    trust = replace(facts.trust, events=tuple(events), cross_check=cross_checks)
    return folded.verdicts, replace(facts, venue=venue, per_property=per_property, trust=trust)


def assigned_trials(executor: Executor, run_id: str) -> dict[str, dict[str, int]]:
    """Who the coordinator assigned the run's trials to (an executor that assigns none: nothing)."""
    assigned = getattr(executor, "assigned", None)
    return assigned(run_id) if callable(assigned) else {}


def all_harness(suite: Suite, manifest: Mapping[str, str], detail: str) -> list[Verdict]:
    """Every property a harness_error with a credit: for fixture drift or no sandbox at all, both before
    any trial ran, so neither is the patch's doing."""
    return [
        harness_verdict(p.id, p.band, manifest.get(p.fixture, ""), detail, creditable=True) for p in suite.properties
    ]


def planner_for(
    facts: RunFacts, tree_digest: str, *, stored_canary: Callable[[str, int, Side], str | None] | None = None
) -> Planner:
    """The run's planner for one tree (the patched one, or the base's for a rerun): a fresh canary per trial
    (except a resumed trial's, which keeps the canary it was observed with: `stored_canary`), and the seeds
    of the run (or of the one it replays): a rerun draws what the trial drew."""
    return Planner.of_suite(
        facts.binding.suite,
        run_id=facts.run_id,
        tree_digest=tree_digest,
        manifest=facts.binding.seal.manifest,
        clock=facts.binding.clock,
        image_id=facts.venue.image_id,
        new_canary=lambda: secrets.token_hex(16),
        seeds_from=facts.venue.seeds_from,
        stored_canary=stored_canary or (lambda _property, _index, _side: None),
    )
