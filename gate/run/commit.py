"""The commit of a run: the books and the card that agrees with them, written whole.

The decision is made inside the books' own transaction (a concurrent run's entries are in what it reads),
then the proposals, the card, its signature and the reports are written, and the journal is marked done.
Ctrl-C is held for all of it: a run stops before the commit or after it, never half-way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord
from gate.core.card.stamp import RunFacts, stamp
from gate.core.policy.ledger import Ledger
from gate.core.policy.policy import Decision, decide
from gate.core.verdicts.bands import SamplerWindow
from gate.core.verdicts.verdict import Verdict
from gate.io.artifacts import card_bytes, write_card
from gate.io.bookstore import BooksStore, HistoryUpdate
from gate.io.cardsig import drop_stale_signature, write_signature
from gate.io.interrupts import held
from gate.io.keys import SigningKey
from gate.io.proposals import write_proposals
from gate.io.reports import ReportTargets, write_reports
from gate.run.executors.journaled import RunJournal


def commit(
    facts: RunFacts,
    verdicts: Sequence[Verdict],
    records: Sequence[TrialRecord],
    *,
    books: BooksStore,
    history: HistoryUpdate | None,
    partial: bool,
    journal: RunJournal,
    card_path: Path,
    signer: SigningKey | None,
    reports: ReportTargets,
) -> VerdictCard:
    """Decide against the books and write books, card, signature and reports as one step; the card.
    `partial`: a -k/--property run, decided against the books but never written to them."""

    def settle(ledger: Ledger, window: SamplerWindow) -> tuple[Decision, Ledger, SamplerWindow]:
        decision = decide(
            verdicts,
            frozen=facts.trust.freezes.frozen,
            ledger=ledger,
            window=window,
            now=facts.started,
            max_fault_share=facts.binding.suite.config.ledger.max_fault_share,
            oracle_edits=facts.binding.oracle_edits,
        )
        if partial:
            # A partial run cannot be accepted, so it must not spend the credits or fill the sampler
            # window a whole run will be judged by.
            return decision, ledger, window
        return decision, decision.ledger.pruned(facts.started), decision.window

    with held():
        journal.commit()  # from here on a resume of this run is refused: its books may be written
        decision = books.update(settle, history=history)
        card = stamp(facts, verdicts, decision)
        write_proposals(card_path, card)  # before the card, so the card never names a file not yet there
        if signer is None:
            drop_stale_signature(card_path)  # an earlier run's envelope would only confuse a reader
        write_card(card_path, card)
        if signer is not None:
            write_signature(card_path, card, card_bytes(card), signer)
        write_reports(card, reports, records)
        journal.done()
    return card
