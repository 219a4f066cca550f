"""A listed card read whole for its page, and the flake files a run left beside it (freeze proposal,
repair task, lift proposal), each parsed on demand and cached by path and modification time."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord
from gate.core.errors import GateError
from gate.core.escaping import one_line
from gate.core.policy.freezes import FreezeEntry, FreezeFile
from gate.core.report.proposals import FREEZE_PROPOSAL, LIFT_PROPOSAL, REPAIR_TASK
from gate.io.artifacts import read_card
from gate.io.evidence import stored_records
from gate.io.inputs import decode_text, read_input
from gate.view.index import RunSummary

TEXT_CHARS = 20_000  # a repair task is a page of Markdown; a larger file is cut, never rendered whole
CACHED_CARDS = 64


class CardCache:
    """The last cards opened, parsed; a card whose file changed is read again."""

    def __init__(self) -> None:
        self._cards: OrderedDict[tuple[Path, float], VerdictCard] = OrderedDict()
        self._lock = threading.Lock()

    def card(self, run: RunSummary) -> VerdictCard:
        """The card `run` lists; GateError when it does not parse."""
        key = (run.path, run.mtime)
        with self._lock:
            if key in self._cards:
                self._cards.move_to_end(key)
                return self._cards[key]
        card = read_card(run.path)
        with self._lock:
            self._cards[key] = card
            while len(self._cards) > CACHED_CARDS:
                self._cards.popitem(last=False)
        return card


def records(card: VerdictCard, path: Path) -> tuple[list[TrialRecord], str]:
    """The card's trial records from the store beside it, and why there are none when they cannot be read."""
    try:
        return stored_records(card, path), ""
    except GateError as exc:
        return [], one_line(exc.message)


@dataclass(frozen=True)
class Proposals:
    """The flake files beside one card folder (none there: empty)."""

    folder: Path
    freezes: tuple[FreezeEntry, ...] = ()
    repair_task: str = ""
    lift_note: str = ""
    problem: str = ""


def _text(path: Path) -> str:
    try:
        data = read_input(path, "flake file")
    except GateError:
        return ""
    text = decode_text(data, path, "flake file") if data else ""
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "\n…"


def read_proposals(folder: Path) -> Proposals:
    """What the runs writing cards into `folder` proposed: freezes awaiting an owner, repair tasks, lifts."""
    problem = ""
    freezes: tuple[FreezeEntry, ...] = ()
    proposal = folder / FREEZE_PROPOSAL
    if proposal.is_file():
        try:
            freezes = FreezeFile.model_validate_json(read_input(proposal, "freeze proposal")).freezes
        except (GateError, ValidationError) as exc:
            problem = one_line(f"{FREEZE_PROPOSAL}: {getattr(exc, 'message', None) or exc.errors()[0]['msg']}")
    try:
        repair, lift = _text(folder / REPAIR_TASK), _text(folder / LIFT_PROPOSAL)
    except GateError as exc:
        repair, lift, problem = "", "", one_line(exc.message)
    return Proposals(folder, freezes, repair, lift, problem)
