"""`gate workers enrol | list | revoke`: the coordinator's registry of worker keys, and with
`--redis-admin-url` each worker's own broker credential (a Redis ACL user, worker.celery.coordinator.acl).
Servers that join by themselves, with a token: gate.cli.invites.

    gate workers enrol worker.pub --name box1 [--redis-admin-url redis://:ADMIN@HOST:6379/0]
    gate workers list
    gate workers revoke box1 [--redis-admin-url ...]

The registry is a file on the coordinator (--workers, $PROBEGATE_WORKERS, or .probegate/workers.json);
a run with --broker checks every result against it, and refuses to start without one unless given
--allow-unenrolled-workers (see enrolled_workers in gate.cli.executors). One JSON
line per worker on stdout; `enrol` with an admin URL prints the worker's broker URL, password included,
once: hand it to the worker as PROBEGATE_BROKER.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.cli.fleet import add_status_action, run_status
from gate.cli.invites import add_invite_actions, run_invites
from gate.cli.settings import ENV_ADMIN, settings_of
from gate.core.errors import RET_OK, UsageError

if TYPE_CHECKING:
    from gate.core.trust.enrolment import EnrolledWorker
    from gate.io.keys import VerifyKey

_REDIS = ("redis://", "rediss://")


def add_workers_parser(sub: Any) -> None:
    """The `workers` subcommand and its three actions."""
    workers = sub.add_parser("workers", help="enrol, list and revoke the workers whose results are accepted")
    workers.set_defaults(handler="gate.cli.workers:run_workers")
    actions = workers.add_subparsers(dest="action", required=True, parser_class=type(workers))
    enrol_p = actions.add_parser("enrol", help="enrol a worker's public key (from `gate-worker key`) under a name")
    enrol_p.add_argument("pubkey", type=Path, metavar="PUBKEY_FILE", help="the worker's public key, PEM")
    enrol_p.add_argument("--name", required=True, help="the worker's name: its observations carry it")
    enrol_p.add_argument(
        "--owned",
        action="store_true",
        help="your own machine: its results need no second run and it runs the others' (docs/explanation/trust.md)",
    )
    list_p = actions.add_parser("list", help="every enrolled key, revoked ones included")
    revoke_p = actions.add_parser("revoke", help="refuse this worker's results from now on; drop its broker user")
    revoke_p.add_argument("name")
    for action in (enrol_p, list_p, revoke_p):
        add_registry_argument(action)
    for action in (enrol_p, revoke_p):
        _add_admin_argument(action)
    add_invite_actions(actions, add_registry_argument, _add_admin_argument)
    add_status_action(actions, add_registry_argument, _add_admin_argument)


def _add_admin_argument(parser: argparse.ArgumentParser) -> None:
    """--redis-admin-url: the broker's admin connection, which makes and deletes broker users."""
    parser.add_argument(
        "--redis-admin-url",
        metavar="URL",
        help=f"an admin connection to the broker, to make or delete broker users "
        f"(default ${ENV_ADMIN}, which keeps the password out of ps)",
    )


def add_registry_argument(parser: argparse.ArgumentParser, *, also: str = "") -> None:
    """--workers FILE: the worker registry."""
    parser.add_argument(
        "--workers",
        type=Path,
        metavar="FILE",
        # $PROBEGATE_WORKERS is gate.io.workers.ENV_REGISTRY, written out so that parsing does not load
        # pydantic (a unit test keeps them equal).
        help=f"the worker registry (default $PROBEGATE_WORKERS, else .probegate/workers.json){also}",
    )


def run_workers(args: argparse.Namespace) -> int:
    """Do one `gate workers` action; prints one JSON line per worker touched."""
    from gate.cli.settings import registry_of
    from gate.io.workers import check_registry_writable, load_roster, locked

    path = registry_of(args)
    admin = getattr(args, "redis_admin_url", None) or settings_of(args).redis_admin
    if admin is not None and not admin.startswith(_REDIS):
        raise UsageError("must be a redis:// or rediss:// URL", field="--redis-admin-url")
    if args.action in ("invite", "invites", "uninvite", "admit"):
        return run_invites(args)
    if args.action == "status":
        if not admin:
            raise UsageError("needs the broker", field="--redis-admin-url (or $PROBEGATE_REDIS_ADMIN)")
        return run_status(args, admin)
    if args.action == "list":
        for worker in load_roster(path, missing_ok=True).workers:
            print(json.dumps(_row(worker)))
        return RET_OK
    # Every refusal that does not need the lock comes before it: a refused command leaves no file.
    if args.action == "enrol":
        key = _enrolling(args.pubkey, args.name)
        check_registry_writable(path, "--workers")
        load_roster(path, missing_ok=True)  # a malformed registry: refused now, read again under the lock
    else:
        load_roster(path)  # no registry: nothing to revoke
    with locked(path):
        if args.action == "enrol":
            return _enrol(path, key, args.name, admin, owned=args.owned)
        return _revoke(path, args.name, admin)


def _enrolling(pubkey: Path, name: str) -> VerifyKey:
    """The key to enrol under `name`, or the refusal of either."""
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise UsageError("a worker name is letters, digits, '-', '_' and '.'", field="--name")
    from gate.io.keys import load_verify_key

    return load_verify_key(pubkey)


def _enrol(path: Path, key: VerifyKey, name: str, admin: str | None, *, owned: bool) -> int:
    from gate.core.trust.enrolment import EnrolledWorker, EnrolmentRefused, enrol
    from gate.io.workers import load_roster, save_roster

    roster = load_roster(path, missing_ok=True)
    from worker.celery.coordinator.acl import acl_user  # late: redis loads only when a broker user is made

    worker = EnrolledWorker(
        name=name,
        key_id=key.key_id,
        public_key=key.pem().decode(),
        enrolled_at=datetime.now(UTC),
        acl_user=acl_user(name) if admin else None,
        owned=owned,
    )
    try:
        updated = enrol(roster, worker)
    except EnrolmentRefused as exc:
        raise UsageError(str(exc), file=str(path)) from None
    row = _row(worker)
    if admin:
        from worker.celery.coordinator.acl import create_worker_user

        user, row["broker_url"], kept = create_worker_user(admin, name, key.key_id)
        if not kept:
            _unkept(user, "made")
    save_roster(path, updated)
    print(json.dumps({**row, "registry": str(path)}))
    return RET_OK


def _revoke(path: Path, name: str, admin: str | None) -> int:
    from gate.core.trust.enrolment import EnrolmentRefused, revoke
    from gate.io.workers import load_roster, save_roster

    roster = load_roster(path)
    try:
        updated, worker = revoke(roster, name, datetime.now(UTC))
    except EnrolmentRefused as exc:
        # Revoked before without an admin URL: this second revoke only deletes the broker user.
        if (gone := roster.by_name(name)) is None or not (gone.acl_user and admin):
            raise UsageError(str(exc), file=str(path)) from None
        updated, worker = roster, gone
    save_roster(path, updated)  # first: its results are refused even if the broker is unreachable
    row = _row(updated.by_key(worker.key_id) or worker)
    if worker.acl_user and admin:
        from worker.celery.coordinator.acl import delete_user

        row["connections_closed"], kept = delete_user(admin, worker.acl_user)
        if not kept:
            _unkept(worker.acl_user, "deleted")
    elif worker.acl_user:
        print(
            f"gate: warning: {name}'s broker user {worker.acl_user} still exists; "
            f"revoke again with --redis-admin-url (or ${ENV_ADMIN}) to delete it",
            file=sys.stderr,
        )
    print(json.dumps({**row, "registry": str(path)}))
    return RET_OK


def _unkept(user: str, done: str) -> None:
    # Without an ACL file a restart forgets the users made since it started (the worker is locked out),
    # and one that loads a stale file brings back users deleted since (a revoked worker's credentials).
    print(
        f"gate: warning: the broker keeps no ACL file (redis-server's aclfile): {user} was {done} in memory only"
        " and a restart undoes it; see deploy/README.md, 'Broker users across restarts'",
        file=sys.stderr,
    )


def _row(worker: EnrolledWorker) -> dict[str, Any]:
    return {
        "name": worker.name,
        "key_id": worker.key_id,
        "state": "enrolled" if worker.active else "revoked",
        "tier": "owned" if worker.owned else "stranger",
        "enrolled_at": worker.enrolled_at.isoformat(),
        "revoked_at": worker.revoked_at.isoformat() if worker.revoked_at else None,
        "acl_user": worker.acl_user,
    }
