"""What `gate view` reads, as the command line composes it: card folders, the journals folder, and
readers of the freeze file, the books' flake history and the fleet, each a callable so that the view
never learns where they live (a file or Redis) and never holds a handle that could write."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gate.core.policy.freezes import FreezeFile
    from gate.core.policy.history import History
    from gate.core.trust.crosscheck_summary import CrossCheckSummary


@dataclass(frozen=True)
class WorkerLine:
    """One worker as the fleet page shows it: its name, its state and what else is known of it."""

    name: str
    state: str  # "enrolled", "revoked"; a live reader adds "up" and "gone"
    owned: bool = False
    key_id: str = ""
    since: str = ""
    detail: str = ""
    disputes: str = ""  # on the newest card: the disagreements naming it, and whether it was caught
    # Its heartbeat's own word, live readers only ("" unknown): the batches it holds now, and the trials of
    # the batches it received in the last minute.
    in_flight: str = ""
    rate: str = ""


@dataclass(frozen=True)
class Sources:
    """The view's inputs. A reader raises `GateError` when its source cannot be read; the page says so."""

    card_dirs: tuple[Path, ...]
    journal_dir: Path | None = None
    freezes: Callable[[], FreezeFile | None] | None = None
    history: Callable[[], History | None] | None = None
    # Given the newest card's cross-check summary (None: no card, or none readable).
    fleet: Callable[[CrossCheckSummary | None], Sequence[WorkerLine]] | None = None
    fleet_live: bool = False  # whether `fleet` knows who is up, or only who is enrolled
    invites: Callable[[], str] | None = None  # the open invites, in one line
    names: dict[str, str] = field(default_factory=dict)  # what each source is, shown on its page


@dataclass(frozen=True)
class Options:
    """How the server behaves: the token a non-loopback bind requires, the hosts a loopback bind answers,
    and the live stream's pace."""

    token: str | None = None
    loopback_hosts: frozenset[str] = frozenset({"127.0.0.1", "localhost", "::1"})
    poll_s: float = 0.25  # how often a live page's stream looks at its journal
    stream_s: float = 300.0  # a stream ends after this long; the browser opens it again
