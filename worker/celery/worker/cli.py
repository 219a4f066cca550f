"""`gate-worker`: join a machine to a probegate run with one command.

    gate-worker --broker redis://:PASSWORD@HOST:6379/0 [--concurrency N]   (same as `serve`)
    gate-worker preflight
    gate-worker key [--key FILE]                 (this worker's public key, for `gate workers enrol`)
    gate-worker beat --broker URL --fixture DIR --seal FILE

`serve` checks Docker, finds or builds the sandbox image as `gate setup` does, proves the
frozen clock and the closed network with a preflight probe, removes containers a dead worker on
this host left behind, then consumes the shared queue (or the one `--queue` pins), its image's
queue and its own direct queue, through which cross-checks reach it (worker.celery.shared.app.direct_queue);
a worker whose broker user is its own (`gate workers enrol`, worker.celery.coordinator.acl) consumes that direct
queue alone.
A batch names its run's image by ID; one this engine lacks is fetched by content, from `--registry`
when the coordinator pushed it there, else from the blob store. Exit 2 when a check fails.
`--pool own` keeps a standing pool of started containers (worker.celery.worker.ownpool), `--pool
SOCKET` takes them from a `gate pool serve` on this machine: a run's first batch here then pays no
container start. By default the worker uses `gate pool serve`'s default socket when one is there,
as `gate run` does.
Every result is signed with this worker's own key (`--key`, default $PROBEGATE_WORKER_KEY or
~/.config/probegate/worker.key), created at first start; `key` prints its public half to enrol.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gate import __version__
from gate.core.errors import RET_OK, GateError, UsageError
from gate.io import interrupts
from gate.io.cliargs import ArgParser, check_redis_url
from gate.io.hostsettings import HostSettings
from worker.celery.worker.settings import WorkerSettings, configure, current

if TYPE_CHECKING:
    from gate.io.keys import SigningKey
    from worker.celery.worker.ownpool import OwnPool

BROKER_HELP = "redis:// or rediss:// URL (default $PROBEGATE_BROKER, which keeps the password out of ps)"
REGISTRY_HELP = "registry host[:port] to pull run images from by digest (default $PROBEGATE_REGISTRY)"
POOL_HELP = (
    "'own': keep a standing pool of --concurrency started containers; a socket path: take them from that "
    "`gate pool serve`; 'off': none (default: $PROBEGATE_POOL, else gate pool serve's default socket if present)"
)
BROKER_FILE_HELP = (
    "where a joined server keeps its name and its own broker URL (default $PROBEGATE_BROKER_FILE or "
    "~/.config/probegate/broker.json); `serve` reads it when no --broker is given"
)
KEY_HELP = (
    "this worker's signing key, created when missing (default $PROBEGATE_WORKER_KEY or ~/.config/probegate/worker.key)"
)


def build_parser(settings: WorkerSettings) -> argparse.ArgumentParser:
    """gate-worker's parser, its defaults from `settings` (read from the environment once, in `main`)."""
    parser = ArgParser(prog="gate-worker", description="Run probegate trials on this machine.")
    parser.set_defaults(settings=settings)
    parser.add_argument("--version", action="version", version=f"%(prog)s (probegate) {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgParser)
    pre = sub.add_parser("preflight", help="prove the frozen clock and the closed network on this engine")
    pre.add_argument("--image", help="sandbox image tag (default: the bundled sandbox image)")
    key = sub.add_parser("key", help="print this worker's public key (PEM) and key id, creating the key when missing")
    key.add_argument("--key", type=Path, help=KEY_HELP)
    serve = sub.add_parser("serve", help="consume trial batches from the broker")
    serve.add_argument("--broker", default=settings.broker, help=BROKER_HELP)
    join = sub.add_parser("join", help="ask the coordinator to enrol this server with a join token, then serve")
    join.add_argument("token", metavar="TOKEN", help="the token `gate workers invite` printed")
    join.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the admission (default 120)")
    join.add_argument("--no-serve", action="store_true", help="join, write the broker file, and exit")
    for parser_ in (serve, join):
        _serve_arguments(parser_, settings)
    beat = sub.add_parser("beat", help="schedule the nightly re-seal check on the broker")
    beat.add_argument("--broker", default=settings.broker, help=BROKER_HELP)
    beat.add_argument("--image", help="the sandbox image whose workers run the check")
    beat.add_argument("--fixture", required=True, help="fixture tree, as the worker running the check sees it")
    beat.add_argument("--seal", required=True, help="seal file, as the worker running the check sees it")
    return parser


def _serve_arguments(serve: argparse.ArgumentParser, settings: WorkerSettings) -> None:
    """What `serve` and `join` (which serves once joined) take."""
    serve.add_argument("--key", type=Path, help=KEY_HELP)
    serve.add_argument("--broker-file", type=Path, default=settings.broker_file, help=BROKER_FILE_HELP)
    serve.add_argument("--concurrency", type=int, default=os.cpu_count() or 2, help="worker processes")
    serve.add_argument(
        "--image", help="image to preflight, and to run batches that name none (default: the bundled sandbox image)"
    )
    serve.add_argument(
        "--sandbox",
        choices=["docker", "stub"],
        default="docker",
        help="stub: a test and benchmark double: runs nothing, answers every trial at once; never for gating",
    )
    serve.add_argument("--cache", type=Path, help="local blob cache (default ~/.cache/probegate)")
    serve.add_argument("--blobs", help="blob store URL (default: the broker's Redis)")
    serve.add_argument("--name", help="worker name (default probegate-<host>-<pid>)")
    serve.add_argument("--registry", default=settings.pool.registry, help=REGISTRY_HELP)
    serve.add_argument("--queue", help="consume this queue instead of the shared one: a fleet for pinned runs")
    serve.add_argument("--pool", help=POOL_HELP)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0].startswith("--") and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "serve")  # `gate-worker --broker URL` is the one-command join
    try:
        args = build_parser(WorkerSettings.from_env(os.environ)).parse_args(argv)
        configure(args.settings.pool)  # the environment's, before any flag is laid over it
        if args.command == "join":
            return _join(args)
        if args.command == "serve" and not args.broker:
            _from_broker_file(args, args.broker_file)
        if args.command in ("serve", "beat"):
            check_redis_url(args.broker, "--broker (or PROBEGATE_BROKER)")
        if args.command == "preflight":
            print(json.dumps(_preflight(args.image, args.settings.pool.host)))
            return RET_OK
        if args.command == "key":
            return _key(args)
        if args.command == "serve":
            return _serve(args)
        return _beat(args)
    except GateError as exc:
        print(f"gate-worker: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except interrupts.Interrupted as exc:  # before Celery took over the signals (worker.celery.worker.stopping)
        print("gate-worker: interrupted", file=sys.stderr)
        return exc.exit_code


def _preflight(image: str | None, host: HostSettings) -> dict[str, object]:
    from worker.host.preflight import preflight
    from worker.host.sandboxes.docker import DockerSandbox

    return preflight(DockerSandbox(image=image, host=host) if image else DockerSandbox(host=host))


def _ensure_image(image: str | None) -> None:
    """The bundled sandbox image, built as `gate setup` builds it when missing; another image must exist."""
    from worker.host.engine import DEFAULT_IMAGE, docker_client, resolve_image_id
    from worker.host.imagesetup import ensure_sandbox_image

    client = docker_client()
    if image and image != DEFAULT_IMAGE:
        resolve_image_id(client, image)
        return
    found = ensure_sandbox_image(client, log=lambda line: print(f"gate-worker: {line}", file=sys.stderr))
    print(f"gate-worker: sandbox image {found.line()}", file=sys.stderr)


def _worker_key(path: Path | None) -> SigningKey:
    """The key at `path` (or the settings'), created when missing; forked pool processes inherit it."""
    from worker.celery.worker import signing

    if path is not None:
        configure(replace(current(), key=path.resolve()))
    return signing.worker_key()  # kept in the module: forked pool processes inherit it


def _key(args: argparse.Namespace) -> int:
    key = _worker_key(args.key)
    sys.stdout.write(key.public().pem().decode())
    print(f"key id: {key.key_id}")
    return RET_OK


def _from_broker_file(args: argparse.Namespace, path: Path) -> bool:
    """Take the broker URL (and the name, unless --name) a join wrote to `path`; False when there is none."""
    from gate.io.inputs import read_input

    if not path.exists():
        return False
    try:
        found = json.loads(read_input(path, "broker file"))
        args.broker, name = found["broker"], found["name"]
    except (ValueError, KeyError, TypeError):
        raise UsageError("not a broker file a join wrote (delete it to join again)", file=str(path)) from None
    args.name = args.name or f"{name}@%h"
    return True


def _join(args: argparse.Namespace) -> int:
    """Join with the token (unless this server joined before: its broker file is there), then serve."""
    path = args.broker_file
    if _from_broker_file(args, path):
        print(f"gate-worker: joined before ({path}); serving", file=sys.stderr)
    else:
        from gate.io.artifacts import write_output
        from worker.celery.worker.join import join

        key = _worker_key(args.key)
        name, url = join(
            args.token,
            key,
            socket.gethostname(),
            wait_s=args.wait,
            note=lambda line: print(f"gate-worker: {line}", file=sys.stderr, flush=True),
        )
        write_output(path, json.dumps({"name": name, "broker": url}).encode() + b"\n", "broker file")
        print(f"gate-worker: joined as {name}; its broker URL is in {path} (mode 0600)", file=sys.stderr)
        args.broker, args.name = url, args.name or f"{name}@%h"
    if args.no_serve:
        return RET_OK
    return _serve(args)


def _serve(args: argparse.Namespace) -> int:
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    key = _worker_key(args.key)  # before anything else: a bad key file stops the worker here
    print(f"gate-worker: probegate {__version__}, signing results with key {key.key_id}", file=sys.stderr)
    from worker.celery.worker.runs import run_idle_s

    try:
        run_idle_s()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.registry:
        from worker.celery.shared.imagenames import registry_repository

        registry_repository(args.registry)  # refuses a malformed one before anything starts
    from worker.host.engine import DEFAULT_IMAGE

    image = args.image or DEFAULT_IMAGE
    pool_env = _pool_option(args.pool)
    found: dict[str, object] = {}
    if args.sandbox == "docker":
        from worker.host.engine import docker_client
        from worker.host.sweep import sweep_dead_workers

        with interrupts.routed():  # SIGTERM mid-preflight: its container is removed, then exit 143
            _ensure_image(args.image)
            found = _preflight(args.image, args.settings.pool.host)
            removed = sweep_dead_workers(docker_client())
        copy = f"copy ({found['work_copy_note']})" if found.get("work_copy_note") else found.get("work_copy")
        print(
            f"gate-worker: preflight ok on {found['image_id'][:19]}; work copies: {copy}; "
            f"removed {removed} stale container(s)",
            file=sys.stderr,
        )
    kept = _own_pool(args, found) if args.sandbox == "docker" and args.pool == "own" else None
    if kept is not None:
        pool_env = str(kept.path)
    given = current()
    served = replace(
        given,
        host=replace(given.host, pool=pool_env) if pool_env else given.host,
        broker=args.broker,
        sandbox=args.sandbox,
        image=image,
        cache=args.cache or given.cache,
        blobs=args.blobs or given.blobs,
        registry=args.registry or given.registry,
    )
    from celery.utils.nodenames import default_nodename, host_format

    from worker.celery.shared.app import SHARED_QUEUE, direct_queue, make_app, queue_for
    from worker.celery.worker.confinement import confined

    own, trials = direct_queue(key.key_id), args.queue or SHARED_QUEUE
    # A worker under its own ACL user (`gate workers enrol`) may take batches from its own queue alone: it
    # consumes that queue only, and keeps its unacknowledged batches to itself (worker.celery.coordinator.acl).
    alone = confined(args.broker, trials, note=lambda line: print(f"gate-worker: {line}", file=sys.stderr))
    if alone:
        print(f"gate-worker: this broker user may take batches only from {own}: consuming it alone", file=sys.stderr)
    queues = [own] if alone else [trials, queue_for(image), own]
    app = make_app(args.broker, alone=own if alone else None, visibility_timeout_s=served.visibility_timeout_s)
    name = args.name or f"probegate-{os.getpid()}@%h"
    # One identity for the whole worker (every pool process): its observations carry it. Its own direct
    # queue is named after its key, which signs every result, so a cross-check can be sent anywhere but here.
    worker_id = args.settings.pool.worker_id or name.replace("%h", socket.gethostname())
    configure(replace(served, worker_id=worker_id))  # before Celery forks the pool processes
    from worker.celery.worker.heartbeat import beat_while_serving

    beat_while_serving(args.broker, own, worker_id)
    try:
        # Built here rather than through Celery's command line, which offers no first-come scheduling: with it a
        # pool process is handed its next batch while it runs one, not after the previous one's ack came back.
        worker = app.Worker(
            hostname=host_format(default_nodename(name)),
            queues=queues,
            concurrency=args.concurrency,
            loglevel="INFO",
            without_gossip=True,
            without_mingle=True,
            optimization="fcfs" if alone else None,
        )
        worker.start()
    finally:
        if kept is not None:
            kept.stop()
    return worker.exitcode or RET_OK


def _pool_option(value: str | None) -> str:
    """The pool processes' standing pool from --pool ("": the setting as PROBEGATE_POOL gave it): a socket
    must be there already, so a typo is a usage error and not a worker that quietly starts containers."""
    if value is None or value == "own":
        return ""
    if value == "off":
        return "off"
    path = Path(value)
    if not path.is_socket():
        raise UsageError(f"--pool {value}: no socket there (start `gate pool serve --socket {value}` first)")
    return str(path.resolve())


def _own_pool(args: argparse.Namespace, found: dict[str, object]) -> OwnPool:
    """Start the worker's own standing pool of --concurrency containers of the preflighted image."""
    from worker.celery.worker.ownpool import OwnPool
    from worker.host.sandboxes.docker import DockerSandbox

    # The mode the pool processes' sandboxes will ask for (a pool hands out only containers of that shape).
    host = args.settings.pool.host
    mode, _ = DockerSandbox(image=str(found["image_id"]), pool="off", host=host).work_copy()
    own = OwnPool(args.concurrency, str(found["image_id"]), mode, tree_mount=host.tree_mount)
    if not own.wait_listening():
        own.stop()
        raise UsageError("--pool own: the worker's pool did not start (see the lines above)")
    print(f"gate-worker: own pool of {args.concurrency} container(s) on {own.path}", file=sys.stderr)
    return own


def _beat(args: argparse.Namespace) -> int:
    from worker.celery.shared.app import SHARED_QUEUE, make_app, queue_for
    from worker.celery.worker.beat import beat_schedule

    app = make_app(args.broker, visibility_timeout_s=args.settings.pool.visibility_timeout_s)
    # The check runs on any worker, or on one started for --image when given.
    app.conf.beat_schedule = beat_schedule(
        args.fixture, args.seal, queue=queue_for(args.image) if args.image else SHARED_QUEUE
    )
    state = Path.home() / ".cache" / "probegate"
    state.mkdir(parents=True, exist_ok=True)
    app.start(["beat", "--loglevel", "INFO", "--schedule", str(state / "beat-schedule")])
    return RET_OK


if __name__ == "__main__":
    sys.exit(main())
