"""`gate view`: the read-only web application over the cards, the run journals, the books, the
freeze file and the worker registry. This module composes its sources (a ledger file or the Redis
books, the registry file) and serves it; `gate.view` never learns where they live."""

from __future__ import annotations

import argparse
import secrets
import socket
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gate.cli.argtypes import port
from gate.cli.settings import registry_of, settings_of
from gate.core.errors import RET_OK, UsageError
from gate.io.cliargs import REDIS_SCHEMES

if TYPE_CHECKING:
    from gate.core.policy.freezes import FreezeFile
    from gate.core.policy.history import History
    from gate.core.suite.suite import Suite
    from gate.core.trust.crosscheck_summary import CrossCheckSummary
    from gate.core.trust.fleet import Beat
    from gate.view.sources import Sources, WorkerLine

DEFAULT_PORT = 8765
DEFAULT_SUITE = Path("gate.toml")


def add_view_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `view` to the `gate` command's subparsers."""
    parser = subparsers.add_parser(
        "view", help="serve a read-only web view of the runs, a live run, the flakes and the fleet"
    )
    parser.set_defaults(handler="gate.cli.view:view_command")
    parser.add_argument(
        "--cards",
        type=Path,
        action="append",
        metavar="DIR",
        help="a folder of verdict cards, searched three levels down (repeatable; default: the suite's card folder)",
    )
    parser.add_argument("--suite", type=Path, help="suite file: its card folder and freeze file (default ./gate.toml)")
    parser.add_argument(
        "--books",
        metavar="FILE|URL",
        help="the books, a ledger file or redis[s]:// URL (default: ledger.json by the cards)",
    )
    parser.add_argument("--workers", type=Path, help="worker registry file (default: $PROBEGATE_WORKERS)")
    parser.add_argument(
        "--broker",
        metavar="URL",
        help="the broker the fleet page reads heartbeats from: who is up, their load (default $PROBEGATE_BROKER)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs the token)"
    )
    parser.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    return parser


def _suite(args: argparse.Namespace) -> Suite | None:
    from gate.io.suite import load_suite

    path: Path | None = args.suite
    if path is None:
        if not DEFAULT_SUITE.is_file():
            return None
        path = DEFAULT_SUITE
    return load_suite(path)


def _card_dirs(args: argparse.Namespace, suite: Suite | None) -> tuple[Path, ...]:
    given: list[Path] | None = args.cards
    if given:
        for folder in given:
            if not folder.is_dir():
                raise UsageError("not a folder", file=str(folder), field="--cards")
        return tuple(folder.resolve() for folder in given)
    card = suite.card_path if suite is not None else None
    if card is None:
        raise UsageError("no cards to show: pass --cards DIR, or run where gate.toml names its `card`", field="--cards")
    return (card.parent.resolve(),)


def _history(
    args: argparse.Namespace, suite: Suite | None, folders: Sequence[Path]
) -> Callable[[], History | None] | None:
    from gate.core.suite.suite import SuiteConfig

    config = suite.config if suite is not None else SuiteConfig()
    text: str | None = args.books
    if text is not None and text.startswith(REDIS_SCHEMES):
        from gate.io.redisbooks import RedisBooks, split_books_url

        split_books_url(text)  # a URL redis cannot parse is refused now
        books = RedisBooks(text, config.ledger, config.sampler, suite_name=config.name)
        return lambda: books.read_all()[1]
    if text is not None and "://" in text:
        raise UsageError("must be a file or a redis:// or rediss:// URL", field="--books")
    path = Path(text) if text is not None else folders[0] / "ledger.json"
    if text is None and not path.is_file():
        return None
    from gate.io.bookstore import load_all

    return lambda: load_all(path, config.ledger, config.sampler)[1]


def _freezes(suite: Suite | None) -> Callable[[], FreezeFile | None] | None:
    if suite is None or suite.freeze_path is None:
        return None
    from gate.io.reviewed import read_freeze_file

    return lambda: read_freeze_file(suite)


def _fleet(
    path: Path, broker: str | None, read: Callable[[str, Collection[str]], Mapping[str, Beat]] | None = None
) -> Callable[[CrossCheckSummary | None], list[WorkerLine]]:
    """The enrolled workers (revoked ones too) with the disputes naming each on the newest card and whether it
    was caught there; with `broker`, also what the broker holds of them now (worker.celery's heartbeats, or
    `read`'s): up or gone, when last seen, and in their own word their batches in flight and trials a minute."""

    def rows(summary: CrossCheckSummary | None) -> list[WorkerLine]:
        from datetime import UTC, datetime

        from gate.core.trust.fleet import fleet
        from gate.io.workers import load_roster
        from gate.view.sources import WorkerLine

        roster = load_roster(path, missing_ok=True)
        beats: Mapping[str, Beat] = {}
        if broker is not None:
            reader = read
            if reader is None:
                from worker.celery.coordinator.liveness import read_beats

                reader = read_beats
            beats = reader(broker, [w.key_id for w in roster.workers if w.active])
        now, by_key = datetime.now(UTC), {w.key_id: w for w in roster.workers}
        lines = []
        for row in fleet(roster, beats, summary, read_card=summary is not None):
            enrolled = by_key[row.key_id]
            disputes = "" if row.disputes is None else f"{row.disputes}" + (", caught" if row.caught else "")
            if broker is None:
                state = "enrolled" if row.state != "revoked" else "revoked"
                since = (enrolled.revoked_at or enrolled.enrolled_at).isoformat(timespec="seconds")
                detail = f"broker user {enrolled.acl_user}" if enrolled.acl_user else ""
                lines.append(WorkerLine(row.name, state, row.tier == "owned", row.key_id, since, detail, disputes))
                continue
            seen = "never" if row.last_seen is None else f"{max(0, int((now - row.last_seen).total_seconds()))} s"
            since = f"seen {seen} ago" if row.last_seen is not None else "never seen"
            in_flight, rate = ("" if n is None else str(n) for n in (row.in_flight, row.trials_last_minute))
            owned = row.tier == "owned"
            lines.append(WorkerLine(row.name, row.state, owned, row.key_id, since, "", disputes, in_flight, rate))
        return lines

    return rows


def _invites(path: Path) -> Callable[[], str]:
    def line() -> str:
        from datetime import UTC, datetime

        from gate.core.trust.fleet import invites_open
        from gate.io.invites import invites_path, load_invites

        status = invites_open(load_invites(invites_path(path)), datetime.now(UTC))
        return f"{status.open} open, {status.uses_left} join(s) left"

    return line


def sources_of(args: argparse.Namespace) -> Sources:
    """The view's sources from the flags, the suite and the settings (the state folder's journals)."""
    from gate.view.sources import Sources

    suite = _suite(args)
    folders = _card_dirs(args, suite)
    registry = registry_of(args)
    broker = args.broker or settings_of(args).broker
    if broker is not None and not broker.startswith(REDIS_SCHEMES):
        raise UsageError("must be a redis:// or rediss:// URL", field="--broker")
    names = {"fleet": str(registry)}
    if suite is not None and suite.freeze_path is not None:
        names["freezes"] = str(suite.freeze_path)
    return Sources(
        card_dirs=folders,
        journal_dir=settings_of(args).state_dir / "journals",
        freezes=_freezes(suite),
        history=_history(args, suite, folders),
        fleet=_fleet(registry, broker),
        invites=_invites(registry),
        fleet_live=broker is not None,
        names=names,
    )


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except (OSError, OverflowError) as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", field="--host") from None
    sock.listen(128)
    return sock


def view_command(args: argparse.Namespace) -> int:
    """Serve the view until Ctrl-C; print its address (with the token when the bind is not loopback)."""
    import uvicorn

    from gate.view.app import build_app
    from gate.view.guard import is_loopback
    from gate.view.sources import Options

    sources = sources_of(args)
    token = None if is_loopback(args.host) else secrets.token_urlsafe(24)
    sock = _listen(args.host, args.port)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"gate view: {url}", flush=True)
    if token:
        print("gate view: not a loopback address: every request needs the token above", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        build_app(sources, Options(token=token)),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=1,
        access_log=False,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return RET_OK
