"""Running trials outside the run's main waves and judging each one: the loop a base rerun
(`gate.run.baserun`) and a flake explanation (`gate.run.explain`) share.

The first valid result of each dispatched trial counts; a stray, a duplicate or another run's result
is dropped, and one that ran in another image or with another seed is a fault (gate.core.trust.provenance),
so no worker decides what a trial showed by answering for another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gate.core.checks import Trial
from gate.core.suite.property import PropertySpec
from gate.core.suite.trial import ClockSpec, TrialSpec
from gate.core.trust.provenance import in_run_image, with_spec_seed
from gate.core.verdicts.verdict import Outcome
from gate.io.checkproc import TrialJudge
from gate.io.snapshot import LocalInputs
from gate.run.executors.base import Executor


def judged(
    executor: Executor,
    specs: Sequence[TrialSpec],
    inputs: LocalInputs,
    *,
    props: Mapping[str, PropertySpec],
    fixtures: Mapping[str, bytes],
    manifest: Mapping[str, str],
    clock: ClockSpec,
    checks: TrialJudge,
) -> dict[str, dict[int, Outcome]]:
    """Run `specs` through `executor` and judge each observation: outcomes by property id and trial
    index (a trial that never came back has none). Raises what the executor raises."""
    sent = {s.key: s for s in specs}
    outcomes: dict[str, dict[int, Outcome]] = {s.property_id: {} for s in specs}
    for obs in executor.run(specs, inputs):
        spec = sent.get(obs.key)
        if spec is None or obs.trial_index in outcomes[obs.property_id]:
            continue  # another run's, a stray or a duplicate: the first result of each trial counts
        obs, _ = in_run_image(spec, obs)  # one that ran in another image is a fault
        obs, _ = with_spec_seed(spec, obs)  # and so is one that ran with another seed
        prop = props[obs.property_id]
        trial = Trial(obs, fixtures[manifest[prop.fixture]], prop.params, clock)
        outcomes[prop.id][obs.trial_index] = checks.judge(prop.id, trial, prop.band)
    return outcomes
