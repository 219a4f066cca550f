"""What `gate run` is asked (`RunRequest`), what it gives back (`RunResult`), and the factories the command
line hands it for what has side effects it chooses: where trials run, how the project image is made, where
the books live (the default: the ledger file beside the card).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gate.core.card.card import VerdictCard
from gate.core.policy.freezes import FreezeFile
from gate.core.suite.suite import ImageSource, Suite
from gate.core.verdicts.verdict import Verdict
from gate.io.artifacts import check_writable
from gate.io.bookstore import BooksStore
from gate.io.envsettings import default_state_dir
from gate.io.ledgerfile import FileBooks
from gate.io.reports import ReportTargets
from gate.run.executors.base import Executor


@dataclass(frozen=True)
class RunRequest:
    suite: Path
    workdir: Path
    fixture: Path | None
    seal: Path | None  # None: the suite's `[suite] seal`
    card: Path | None  # None: the suite's `[suite] card` (filled in once the oracle is read)
    retries: int = 0
    base: str | None = None
    ledger: Path | None = None
    new_ledger: bool = False  # --new-ledger: the books may (and must) not exist yet
    image: str | None = None  # --image: the sandbox image tag (refused when the suite names its own)
    cross_check: float | None = None  # --cross-check: the share of trials run again elsewhere (None: the suite's)
    calibration: Path | None = None
    calibrated_deadlines: bool = True  # False for `gate baseline`, which measures instead
    reports: ReportTargets = field(default_factory=ReportTargets)  # JUnit XML / Markdown, written right after the card
    properties: tuple[str, ...] = ()  # --property: run only these ids (with `keyword`: either picks)
    keyword: str | None = None  # -k: run only ids holding this substring or matching this glob
    sign_key: Path | None = None  # --sign-key: sign the card (its envelope beside it, gate.io.cardsig)
    unenrolled_workers: bool = False  # trials go over a broker with no worker registry (the card records it)
    seeds_from: str | None = None  # --replay-seeds: the run whose trial seeds to give (None: this run's own)
    resume: bool = False  # --resume: continue the interrupted run from its journal (gate.io.journal)
    interpreter: Literal["fresh", "warm"] | None = None  # --interpreter: over the suite's (None: the suite's)
    # The coordinator's state folder, where the run keeps its journal (the entry point's settings name it).
    state_dir: Path = field(default_factory=default_state_dir)


@dataclass(frozen=True)
class RunResult:
    card: VerdictCard
    verdicts: tuple[Verdict, ...]
    freeze_file: FreezeFile | None = None  # as the oracle read it (the nightly pair reads creation times)


# Where trials run (the command line picks, with its own settings: broker, jobs, workers…), given the image
# to run them in: the suite's project image, else --image, else None (the sandbox's own).
ExecutorFactory = Callable[[str | None], Executor]
# Finds or builds the suite's project image and returns its ID (the command line picks Docker).
ImageFactory = Callable[[ImageSource], str]
# Where the books live, under the suite's terms (the command line picks a file or Redis).
BooksFactory = Callable[[RunRequest, Suite], BooksStore]


def card_of(request: RunRequest) -> Path:
    """The card's path; `run_gate` fills it in (--card, else the suite's) before anything reads it."""
    assert request.card is not None, "run_gate resolves the card before the run"
    return request.card


def file_books(request: RunRequest, suite: Suite) -> BooksStore:
    """The default books: a locked JSON file, `--ledger` or `ledger.json` beside the card (it and its lock
    are outputs: gate.run.admission refuses them inside the tree)."""
    path = request.ledger or card_of(request).parent / "ledger.json"
    # Checked here too: beside a card the suite names, the command line could not check it.
    check_writable(path, "--ledger")
    return FileBooks(path, suite.config.ledger, suite.config.sampler, create=request.new_ledger)
