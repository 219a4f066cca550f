"""`gate baseline --twice`: the nightly pair. The baseline runs twice in a row on the same tree (same
commit, seal and image), both runs go into the flake history in the books (`--ledger`: the file or
Redis store `gate run` uses; only the history changes, never a credit or the sampler window), and:

- a safety or contract property whose colour (kind) differs between the two runs is a flake named
  with both run ids: a contract flake gets a freeze proposal (owner empty) and both get a repair task,
  beside the baseline card (`gate.core.report.proposals`); a safety flake is reported broken, never proposed;
  each is explained first (`gate flakes explain`), so the proposal's reason and the task name its cause;
- a frozen property that has passed `runs_needed(target)` recorded runs in a row under the seal — the
  nightly pairs' and those of ordinary runs on the base's own tree (`gate.run.runhistory`), counted
  after the freeze's `created_at` when its entry has one — is proposed for lifting (`lift-proposal.md`
  beside the card).

The second run's card is then written again with `flake_files` and `lift_proposals` filled in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gate.core.card.card import VerdictCard
from gate.core.policy.explain import Explanation
from gate.core.policy.flakes import FLAKE_BANDS, FlakeFiles
from gate.core.policy.freezes import FreezeFile, created
from gate.core.policy.history import (
    LIFT_TARGET,
    History,
    HistoryEntry,
    LiftProposal,
    PairFlake,
    lift_due,
    pair_flakes,
    record,
)
from gate.core.report.causes import suite_causes
from gate.core.report.proposals import (
    FREEZE_PROPOSAL,
    REPAIR_TASK,
    pair_freeze_proposal,
    render_lift_note,
    render_pair_repair_task,
)
from gate.core.verdicts.verdict import Band
from gate.io.artifacts import write_card
from gate.io.bookstore import BooksStore
from gate.io.proposals import write_nightly_files


@dataclass(frozen=True)
class NightlyOutcome:
    card: VerdictCard  # the second run's card as rewritten
    flakes: tuple[PairFlake, ...]
    lifts: tuple[LiftProposal, ...]
    freeze_ids: tuple[str, ...]
    broken_safety: tuple[str, ...]
    causes: tuple[Explanation, ...] = ()
    # Every measured cause across the suite (the freeze file's and this pair's), with the properties it moves.
    suite_causes: dict[str, tuple[str, ...]] = field(default_factory=dict)


# Explains the named properties on the pair's tree (`gate.run.explain`), one explanation each.
Explain = Callable[[Sequence[str]], Sequence[Explanation]]


def entries_of(card: VerdictCard) -> dict[str, HistoryEntry]:
    """One history entry per property of a run's card."""
    return {
        row.id: HistoryEntry(
            run_id=card.run_id,
            at=card.created_at,
            seal=card.fixture.seal,
            commit=card.base_rev or "",
            image_id=card.image_id,
            kind=row.kind,
            trials=row.trials,
            hits=row.hits,
        )
        for row in card.properties
    }


def settle_pair(
    store: BooksStore,
    first: VerdictCard,
    second: VerdictCard,
    bands: Mapping[str, Band],
    *,
    card_path: Path,
    target: float = LIFT_TARGET,
    freeze_file: FreezeFile | None = None,
    explain: Explain | None = None,
) -> NightlyOutcome:
    """Record both runs in the store's history (one transaction), explain each flake (`explain`), then
    write the flake and lift files; `freeze_file` (as the second run's oracle read it) says when each
    freeze began."""
    one, two = entries_of(first), entries_of(second)
    seen: list[History] = []

    def add(history: History) -> History:
        updated = record(record(history, one), two)
        seen[:] = [updated]  # a retried transaction overwrites: the history as last written
        return updated

    store.update(lambda ledger, window: (None, ledger, window), history=add)
    flakes = tuple(f for f in pair_flakes(one, two) if bands.get(f.property_id) in FLAKE_BANDS)
    since = created(freeze_file, second.freeze_set)
    lifts = lift_due(seen[0], second.freeze_set, seal=second.fixture.seal, since=since, target=target)
    causes = tuple(explain([f.property_id for f in flakes])) if explain is not None and flakes else ()
    proposal = pair_freeze_proposal(flakes, bands, created_at=second.created_at, causes=causes)
    task = render_pair_repair_task(flakes, bands, second.suite, causes=causes)
    write_nightly_files(card_path, proposal, task, render_lift_note(lifts))
    broken = tuple(f.property_id for f in flakes if bands.get(f.property_id) is Band.SAFETY)
    files = None
    if flakes:
        files = FlakeFiles(
            freeze_proposal=FREEZE_PROPOSAL if proposal else None,
            repair_task=REPAIR_TASK,
            freeze_ids=tuple(e.freeze_id for e in proposal.freezes) if proposal else (),
            broken_safety=broken,
        )
    # The second run's card names what the pair wrote beside it and the freezes due to be lifted.
    card = second.model_copy(
        update={"flake_files": files, "lift_proposals": lifts, "pair_flakes": flakes, "flake_causes": causes}
    )
    write_card(card_path, card)
    return NightlyOutcome(
        card=card,
        flakes=flakes,
        lifts=lifts,
        freeze_ids=files.freeze_ids if files else (),
        broken_safety=broken,
        causes=causes,
        suite_causes=suite_causes(freeze_file, causes),
    )
