"""Planning: each classified property of the suite becomes its trial specs, bound to the fixture
digest the seal recorded, each with the seed the coordinator derives for it from the run id (a worker
never chooses one, and a trial replays exactly). Pure: the seal, clock and run id come in as values.

Statistical properties are planned in waves (`Planner.trials(prop, start, count)`); `plan` is the
whole plan at once, every property at its planned (maximum) trial count.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.core.errors import SuiteError
from gate.core.suite.property import PropertySpec
from gate.core.suite.suite import Suite
from gate.core.suite.trial import MAX_SEED, ClockSpec, Interpreter, Limits, Side, TrialSpec

SEED_DOMAIN = "probegate/trial-seed/v1"


def trial_seed(root: str, property_id: str, trial_index: int) -> int:
    """The seed of trial `trial_index` of `property_id` in the run whose seeds come from `root` (its run
    id): the first 53 bits of the sha256 of the JSON array [SEED_DOMAIN, root, property_id, trial_index]."""
    # JSON keeps the three apart whatever they hold; 53 bits keep the seed exact in any JSON reader.
    text = json.dumps([SEED_DOMAIN, root, property_id, trial_index], separators=(",", ":"), ensure_ascii=True)
    return int.from_bytes(hashlib.sha256(text.encode("ascii")).digest()[:8], "big") >> (64 - MAX_SEED.bit_length())


@dataclass(frozen=True)
class Planner:
    """What every trial of one run shares; `trials` stamps out a property's specs from it."""

    run_id: str
    probe_argv: tuple[str, ...]
    tree_digest: str
    manifest: Mapping[str, str]
    clock: ClockSpec
    limits: Limits = field(default_factory=Limits)
    suite_file: str = "gate.toml"
    image_id: str = ""  # when set, a worker whose image differs refuses the trial
    pythonpath: tuple[str, ...] = ()
    interpreter: Interpreter = Interpreter.FRESH
    new_canary: Callable[[], str] = lambda: ""  # the runner injects a fresh secret per trial
    seeds_from: str | None = None  # whose trial seeds to give (`gate run --replay-seeds`); None: this run's
    # A resumed run's trials keep the canary their stored observation was made with (None: a fresh one).
    stored_canary: Callable[[str, int, Side], str | None] = lambda _property, _index, _side: None
    # The tree `tree_digest` names: the patched one, or the base's for a paired property's other side
    # (whose trial i gets the same seed, fixture and clock as the patch's trial i).
    side: Side = Side.PATCH

    @classmethod
    def of_suite(
        cls, suite: Suite, *, run_id: str, tree_digest: str, manifest: Mapping[str, str], clock: ClockSpec, **more: Any
    ) -> Planner:
        """The planner for `suite`'s trials: its probe, limits, pythonpath and interpreter; `more` as the fields."""
        return cls(
            run_id=run_id,
            probe_argv=suite.config.probe,
            tree_digest=tree_digest,
            manifest=manifest,
            clock=clock,
            limits=suite.config.limits,
            suite_file=str(suite.path),
            pythonpath=suite.config.pythonpath,
            interpreter=Interpreter(suite.config.interpreter),
            **more,
        )

    def trials(self, prop: PropertySpec, start: int, count: int) -> list[TrialSpec]:
        """Specs for trial indices start .. start+count-1 of `prop`."""
        check_fixtures([prop], self.manifest, suite_file=self.suite_file)
        root = self.run_id if self.seeds_from is None else self.seeds_from
        return [
            TrialSpec(
                run_id=self.run_id,
                property_id=prop.id,
                trial_index=index,
                seed=trial_seed(root, prop.id, index),
                probe_argv=self.probe_argv,
                tree_digest=self.tree_digest,
                fixture_path=prop.fixture,
                fixture_digest=self.manifest[prop.fixture],
                deadline_s=prop.deadline_s,
                clock=self.clock,
                limits=self.limits,
                canary=self._canary(prop.id, index),
                image_id=self.image_id,
                pythonpath=self.pythonpath,
                side=self.side,
                interpreter=self.interpreter,
            )
            for index in range(start, start + count)
        ]

    def _canary(self, property_id: str, index: int) -> str:
        stored = self.stored_canary(property_id, index, self.side)
        return self.new_canary() if stored is None else stored


def plan(
    properties: Sequence[PropertySpec],
    *,
    run_id: str,
    probe_argv: tuple[str, ...],
    tree_digest: str,
    manifest: Mapping[str, str],
    clock: ClockSpec,
    limits: Limits,
    suite_file: str = "gate.toml",
) -> list[TrialSpec]:
    """Trial specs for every property, in suite order; a fixture missing from the seal is refused."""
    check_fixtures(properties, manifest, suite_file=suite_file)
    planner = Planner(run_id, probe_argv, tree_digest, manifest, clock, limits, suite_file)
    return [spec for prop in properties for spec in planner.trials(prop, 0, prop.planned_trials())]


def check_fixtures(properties: Sequence[PropertySpec], manifest: Mapping[str, str], *, suite_file: str) -> None:
    """Refuse a property bound to a file the sealed tree does not hold."""
    for prop in properties:
        if prop.fixture not in manifest:
            raise SuiteError(
                f"fixture {prop.fixture!r} is not in the sealed fixture tree",
                file=suite_file,
                field=f"property {prop.id}",
            )
