"""`gate flakes explain`: rerun flaky properties on the base tree in controlled variants until a
measurement names the source of nondeterminism that moves each one (gate.core.policy.explain).

The base is a `--base` revision's version of the work folder, or the work tree as it is with
`--allow-unchecked-oracle` (the nightly pair, which runs on the base commit's own checkout). The
oracle (suite, checks, seal, clock) is read as for `gate run`; trials go through the executor the
command line picks, so the local pool and enrolled Celery workers give the same answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import structlog

from gate.core.errors import UsageError
from gate.core.policy.explain import BUDGET, STEADY_N, Explanation
from gate.core.policy.explaining import Explainer
from gate.core.policy.sources import vary
from gate.core.suite.plan import Planner, check_fixtures
from gate.core.suite.property import PropertySpec
from gate.core.suite.suite import Suite
from gate.core.suite.trial import TrialSpec
from gate.core.verdicts.verdict import Band, Outcome, OutcomeKind
from gate.io.checkproc import JudgeFactory, judging
from gate.io.fixtures import verify
from gate.io.gitbase import base_tree
from gate.io.inputs import read_input
from gate.io.patchedtree import check_fits, read_patched_tree
from gate.io.snapshot import LocalInputs
from gate.io.treeselect import tree_selection
from gate.run.admission import run_image
from gate.run.executors.base import opened
from gate.run.judged import judged
from gate.run.oracle import Oracle, OracleRequest, read_oracle
from gate.run.request import ExecutorFactory, ImageFactory

log = structlog.get_logger("gate.run")

LOST = "the trial never came back"


@dataclass(frozen=True)
class ExplainRequest:
    """What `gate flakes explain` is asked: which properties, on which base, with what budget."""

    suite: Path
    workdir: Path
    properties: tuple[str, ...]
    fixture: Path | None = None
    seal: Path | None = None
    base: str | None = None
    allow_unchecked_oracle: bool = False  # no --base: the work tree is taken as the base, unchecked
    image: str | None = None
    interpreter: Literal["fresh", "warm"] | None = None
    steady_n: int = STEADY_N
    budget: int = BUDGET


def explain_flakes(
    request: ExplainRequest,
    *,
    executor_factory: ExecutorFactory,
    image_factory: ImageFactory | None = None,
    judge_factory: JudgeFactory = judging,
    run_id: str | None = None,
) -> list[Explanation]:
    """One explanation per property asked for, in the order asked; configuration errors raise first."""
    if request.base is None and not request.allow_unchecked_oracle:
        raise UsageError(
            "explain runs on the base: pass --base REV, or --allow-unchecked-oracle to take the work tree as the base",
            field="--base",
        )
    oracle_request = OracleRequest(
        suite=request.suite,
        workdir=request.workdir,
        seal=request.seal,
        fixture=request.fixture,
        base=request.base,
        calibrated_deadlines=False,
        interpreter=request.interpreter,
    )
    with read_oracle(oracle_request) as oracle:
        props = _chosen(oracle.suite, request.properties, shown=str(request.suite))
        return _explain(
            request,
            oracle,
            props,
            executor_factory=executor_factory,
            image=run_image(request.image, oracle.image, image_factory),
            judge_factory=judge_factory,
            run_id=run_id or uuid.uuid4().hex,
        )


def _chosen(suite: Suite, ids: Sequence[str], *, shown: str) -> list[PropertySpec]:
    """The properties asked for: each must exist and be a safety or contract property."""
    by_id = {p.id: p for p in suite.properties}
    if not ids:
        raise UsageError("name at least one property to explain", field="PROPERTY")
    for pid in ids:
        prop = by_id.get(pid)
        if prop is None:
            raise UsageError(f"no property {pid!r} in the suite", file=shown, field="PROPERTY")
        if prop.band is Band.STATISTICAL:
            raise UsageError(f"{pid!r} is statistical: its trials vary by design", file=shown, field="PROPERTY")
    return [by_id[pid] for pid in dict.fromkeys(ids)]


def _explain(
    request: ExplainRequest,
    oracle: Oracle,
    props: list[PropertySpec],
    *,
    executor_factory: ExecutorFactory,
    image: str | None,
    judge_factory: JudgeFactory,
    run_id: str,
) -> list[Explanation]:
    suite = oracle.suite
    selection = tree_selection(suite, request.workdir, suite_file=request.suite)
    root = oracle.base_workdir or request.workdir
    tree = base_tree(root, selection) if oracle.base_workdir else read_patched_tree(root, selection)
    check_fits(tree, suite.config.limits, where=root)
    current = verify(oracle.fixture_root, oracle.expected, seal_file=str(oracle.seal_file))
    check_fixtures(props, current.manifest, suite_file=str(suite.path))
    fixtures = {current.manifest[p.fixture]: read_input(oracle.fixture_root / p.fixture, "fixture") for p in props}
    with (
        judge_factory(oracle.checks_module, suite.config) as checks,
        opened(executor_factory(image), run_id, suite.config.limits) as executor,
        LocalInputs(root, fixtures, tree=tree, overrides=oracle.overrides, limits=suite.config.limits) as inputs,
    ):
        planner = Planner.of_suite(
            suite,
            run_id=run_id,
            tree_digest=inputs.tree_digest,
            manifest=current.manifest,
            clock=oracle.clock,
            image_id=executor.image_id(),
        )

        def run(specs: list[TrialSpec]) -> dict[int, Outcome]:
            outcomes = judged(
                executor,
                specs,
                inputs,
                props={p.id: p for p in props},
                fixtures=fixtures,
                manifest=current.manifest,
                clock=oracle.clock,
                checks=checks,
            )
            return outcomes.get(specs[0].property_id, {})

        return [_one(prop, planner, run, request) for prop in props]


def _one(
    prop: PropertySpec,
    planner: Planner,
    run: Callable[[list[TrialSpec]], dict[int, Outcome]],
    request: ExplainRequest,
) -> Explanation:
    """Drive one property's plan to its end, a chunk of trials at a time."""
    explainer = Explainer(prop.id, steady_n=request.steady_n, budget=request.budget)
    [first] = planner.trials(prop, 0, 1)
    log.info("explain.start", property_id=prop.id, budget=request.budget, steady_n=request.steady_n)
    while (chunk := explainer.next_chunk()) is not None:
        planned = planner.trials(prop, chunk.start, chunk.count)
        specs = [vary(spec, chunk.variant, fixed_seed=first.seed) for spec in planned]
        shown = run(specs)
        explainer.record(
            [
                shown.get(s.trial_index) or Outcome(trial_index=s.trial_index, kind=OutcomeKind.FAULT, detail=LOST)
                for s in specs
            ]
        )
        log.debug("explain.chunk", property_id=prop.id, variant=chunk.variant.label(), trials=chunk.count)
    explanation = explainer.explanation()
    log.info("explain.done", property_id=prop.id, finding=explanation.finding, source=explanation.source)
    return explanation
