"""Per-worker broker credentials: one Redis ACL user per worker, holding only what a Celery worker on
the kombu Redis transport needs (worked out against a real worker, see tests/integration/test_enrol.py).

Each rule, and why it is there:

    reset on >PASSWORD         a fresh user with its own generated password, no inherited rights
    +ping +client|setname      health checks; Celery names its connections (CLIENT SETINFO: denied, harmless)
    +select                    the URL's /DB (kombu and the result backend select it on connect)
    +brpop +rpop +llen         take batches off the queues (BRPOP; RPOP/LLEN when kombu polls or sizes a queue),
    +lpush +rpush +lrange      put a message back (warm shutdown, restoring a dead worker's unacked batches);
    +exists                    LPUSH also answers the coordinator's ping/inspect; EXISTS in the binding sweep
    +sadd +srem +smembers      declare the worker's queues: kombu records bindings in _kombu.binding.*, their
    +zadd +zrem +zrange        deadlines in a zset (a Lua script: EVALSHA, EVAL and SCRIPT LOAD/EXISTS the
    +zrangebyscore +evalsha    first time, TIME inside it) and sweeps expired ones; SMEMBERS routes replies
    +eval +script|load
    +script|exists +time
    +hset +hget +hdel          late acks: the unacked hash and its index zset (kombu's QoS) under MULTI/EXEC,
    +multi +exec +discard      WATCH/SET NX/GET/DEL/PEXPIRE for the mutex around restoring a dead worker's
    +watch +unwatch +set       batches
    +get +del +pexpire
    +setex +expire             store the result (celery-task-meta-<id>, expiring)
    +psubscribe +subscribe     listen to the control broadcast (`probegate_close_run`, ping/inspect) on
    +punsubscribe +unsubscribe /DB.celery.pidbox
    ~probegate.*               the trial queues (probegate.trials, probegate.<image>, their priority lists)
    ~_kombu.binding*           kombu's binding sets, deadlines and permanent sets
    ~unacked ~unacked_index    kombu's unacked bookkeeping
    ~unacked_mutex
    ~celery-task-meta-*        results
    ~*.celery.pidbox*          its own pidbox queue (declared, LLEN), and replies to the coordinator's ping/inspect
    %R~probegate:blob:*        read-only: the blob store (trees, fixtures, image chunks) and its names;
    %R~probegate:name:*        workers fetch by digest and never write there
    &/DB.celery.pidbox         the control fanout (kombu's fanout prefix is /DB.), to subscribe to only:
    (+publish                  PUBLISH lives in a selector of its own, on the result channels and the
     &celery-task-meta-*        worker heartbeats (Celery's event dispatcher) alone, so a worker cannot
     &/DB.celeryev*)            broadcast control commands (shutdown, revoke, close a run) to the others

Everything else is denied: the books (`probegate:books:*`), blob writes, KEYS/SCAN, FLUSH*, CONFIG,
ACL, CLIENT KILL, MONITOR, and every other user's connections.
"""

from __future__ import annotations

import secrets
from urllib.parse import quote, urlsplit, urlunsplit

import redis

from worker.celery.broker import broker_call

USER_PREFIX = "probegate-worker-"
COMMANDS = str.split(
    "+ping +client|setname +select "
    "+brpop +rpop +lpush +rpush +llen +lrange +exists "
    "+sadd +srem +smembers +zadd +zrem +zrange +zrangebyscore +evalsha +eval +script|load +script|exists +time "
    "+hset +hget +hdel +multi +exec +discard +watch +unwatch +set +get +del +pexpire "
    "+setex +expire "
    "+psubscribe +subscribe +punsubscribe +unsubscribe"
)
KEYS = [
    "~probegate.*",
    "~_kombu.binding*",
    "~unacked",
    "~unacked_index",
    "~unacked_mutex",
    "~celery-task-meta-*",
    "~*.celery.pidbox*",
    "%R~probegate:blob:*",
    "%R~probegate:name:*",
]


def acl_user(name: str) -> str:
    """The ACL user of the worker enrolled as `name`."""
    return USER_PREFIX + name


def worker_rules(db: int, password: str) -> list[str]:
    """The ACL SETUSER arguments for one worker on database `db` (the module docstring says why each is there)."""
    publish = f"(+publish &celery-task-meta-* &/{db}.celeryev*)"
    return ["reset", "on", f">{password}", "resetchannels", *COMMANDS, *KEYS, f"&/{db}.celery.pidbox", publish]


def _db(url: str) -> int:
    path = urlsplit(url).path.strip("/")
    return int(path) if path.isdigit() else 0


def create_worker_user(admin_url: str, name: str) -> tuple[str, str]:
    """Create (or reset) `name`'s ACL user with a new password; returns (user, the worker's broker URL)."""
    user, password = acl_user(name), secrets.token_urlsafe(32)
    with broker_call("creating the worker's ACL user"):
        client = redis.Redis.from_url(admin_url)
        try:
            client.execute_command("ACL", "SETUSER", user, *worker_rules(_db(admin_url), password))
        finally:
            client.close()
    return user, worker_url(admin_url, user, password)


def delete_worker_user(admin_url: str, user: str) -> int:
    """Delete the ACL user and close every connection it holds now; returns how many were closed."""
    with broker_call("deleting the worker's ACL user"):
        client = redis.Redis.from_url(admin_url)
        try:
            try:
                closed = int(client.execute_command("CLIENT", "KILL", "USER", user, "SKIPME", "yes"))
            except redis.exceptions.ResponseError as exc:
                if "No such user" not in str(exc):
                    raise
                closed = 0  # deleted before (or never made): nothing left to close
            # DELUSER also drops any connection that logged in again since the kill.
            client.execute_command("ACL", "DELUSER", user)
            return closed
        finally:
            client.close()


def worker_url(admin_url: str, user: str, password: str) -> str:
    """The admin URL with the worker's user and password in place of the admin's."""
    parts = urlsplit(admin_url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
