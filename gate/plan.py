"""Planning: each classified property of the suite becomes its trial specs, bound to the fixture
digest the seal recorded. Pure: the seal, clock and run id come in as values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gate.errors import SuiteError
from gate.suite import PropertySpec
from gate.trial import ClockSpec, Limits, TrialSpec


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
    specs: list[TrialSpec] = []
    for prop in properties:
        digest = manifest[prop.fixture]
        specs.extend(
            TrialSpec(
                run_id=run_id,
                property_id=prop.id,
                trial_index=index,
                probe_argv=probe_argv,
                tree_digest=tree_digest,
                fixture_path=prop.fixture,
                fixture_digest=digest,
                deadline_s=prop.deadline_s,
                clock=clock,
                limits=limits,
            )
            for index in range(prop.planned_trials())
        )
    return specs


def check_fixtures(properties: Sequence[PropertySpec], manifest: Mapping[str, str], *, suite_file: str) -> None:
    """Refuse a property bound to a file the sealed tree does not hold."""
    for prop in properties:
        if prop.fixture not in manifest:
            raise SuiteError(
                f"fixture {prop.fixture!r} is not in the sealed fixture tree",
                file=suite_file,
                field=f"property {prop.id}",
            )
