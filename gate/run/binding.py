"""A run before its first trial, in two stages: prepared before any container (the properties selected,
the clock read, the books checked, the run admitted: gate.run.admission), then bound once the executor is
open (the seal checked, the facts the card binds gathered, the fixtures read).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from gate.core.card.calibration import deadline_source
from gate.core.card.stamp import Binding, PerProperty, RunFacts, Trust, Venue
from gate.core.errors import SealDriftError
from gate.core.policy.freezes import resolve
from gate.core.suite.plan import check_fixtures
from gate.core.suite.property import PropertySpec
from gate.core.suite.seal import Seal
from gate.core.suite.selection import select_ids
from gate.core.suite.suite import Suite
from gate.io.bookstore import BooksStore
from gate.io.fixtures import seal_tree, verify
from gate.io.inputs import read_input
from gate.run.admission import Admitted, admit
from gate.run.oracle import Oracle
from gate.run.request import BooksFactory, ImageFactory, RunRequest


@dataclass(frozen=True)
class Prepared:
    """One run as it stands before any container: the request (with its card path), the oracle, the
    selected suite, the start, the checked books, what admission read, and the run's id."""

    request: RunRequest
    oracle: Oracle
    suite: Suite  # only the selected properties
    chosen: tuple[str, ...] | None  # None: every property
    started: datetime
    books: BooksStore
    admitted: Admitted
    run_id: str = ""


@dataclass(frozen=True)
class Bound:
    """The run bound to its seal: the facts its card binds, the fixtures' bytes by digest, and the seal's
    drift (None: the fixtures are as sealed)."""

    facts: RunFacts
    fixtures: dict[str, bytes]
    drift: SealDriftError | None


def prepare(
    request: RunRequest,
    oracle: Oracle,
    *,
    now: Callable[[], datetime],
    books_factory: BooksFactory,
    image_factory: ImageFactory | None,
) -> Prepared:
    """The stage before any container: the properties selected, the clock read, the books checked, the
    run admitted (its id is the journal's to give: `run_id` stays empty)."""
    whole = oracle.suite
    # Only the selected properties are planned, run and carded; freezes and `prove` still see the whole suite.
    chosen = select_ids([p.id for p in whole.properties], exact=request.properties, keyword=request.keyword)
    suite = whole if chosen is None else whole.model_copy(update={"properties": _only(whole, chosen)})
    started = now()
    # Only checked here (missing, unreachable, corrupt: refused before any container); read at decision time.
    books = books_factory(request, suite)
    books.check()
    admitted = admit(request, oracle, suite, books, image_factory)
    return Prepared(request, oracle, suite, chosen, started, books, admitted)


def bind(run: Prepared) -> Bound:
    """The stage that checks the seal, binds the facts the card will carry and reads the fixtures; drift
    is kept for the trials to report, not raised."""
    oracle, suite = run.oracle, run.suite
    drift: SealDriftError | None = None
    try:
        current = verify(oracle.fixture_root, oracle.expected, seal_file=str(oracle.seal_file))
    except SealDriftError as exc:
        drift, current = exc, seal_tree(oracle.fixture_root)
    if drift is None:
        check_fixtures(suite.properties, current.manifest, suite_file=str(suite.path))
    facts = _facts(run, current)
    fixtures = {
        current.manifest[p.fixture]: read_input(oracle.fixture_root / p.fixture, "fixture")
        for p in suite.properties
        if p.fixture in current.manifest
    }
    return Bound(facts, fixtures, drift)


def _facts(run: Prepared, current: Seal) -> RunFacts:
    """What the run is bound to before any trial, under the seal the fixtures have now."""
    request, oracle, whole = run.request, run.oracle, run.oracle.suite
    freezes = resolve(
        oracle.freeze_file, bands=whole.bands(), seal=current.digest, now=run.started, source=str(whole.freeze_path)
    )
    return RunFacts(
        run_id=run.run_id,
        started=run.started,
        retries=request.retries,
        binding=Binding(
            suite=run.suite,
            workdir=request.workdir,
            fixture_root=oracle.fixture_root,
            seal=current,
            clock=oracle.clock,
            base=oracle.base_commit,
            oracle_edits=oracle.edits,
            suite_file=str(request.suite),
            selection=run.chosen,
        ),
        trust=Trust(freezes=freezes),
        venue=Venue(unenrolled_workers=request.unenrolled_workers, seeds_from=request.seeds_from),
        per_property=PerProperty(
            deadline_sources={
                p.id: deadline_source(p.id, p.deadline_s, oracle.calibration, current.digest)
                for p in run.suite.properties
            },
        ),
    )


def _only(suite: Suite, chosen: tuple[str, ...]) -> tuple[PropertySpec, ...]:
    return tuple(p for p in suite.properties if p.id in chosen)
