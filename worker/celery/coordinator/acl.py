"""Per-worker broker credentials: one Redis ACL user per worker, which may take batches only from its own
direct queue and write only its own results (worked out against real workers, see
tests/integration/worker_celery/test_enrol.py).
A worker started under such a user finds it may not read the shared queue (worker.celery.worker.confinement)
and consumes its direct queue alone, keeping kombu's unacked bookkeeping under that queue's name
(worker.celery.worker.cli, worker.celery.shared.app); results of a direct queue's batches live under that queue
too (worker.celery.shared.results), where the coordinator reads them.

Each rule, and why it is there (Q is the worker's direct queue, probegate.direct.<its key id>):

    reset on >PASSWORD         a fresh user with its own generated password, no inherited rights
    +ping +client|setname      health checks; Celery names its connections (CLIENT SETINFO: denied, harmless)
    +select                    the URL's /DB (kombu and the result backend select it on connect)
    +brpop +rpop +llen         take batches off its queue (BRPOP; RPOP/LLEN when kombu polls or sizes a queue),
    +lpush +rpush +lrange      put one back (warm shutdown, restoring its own unacked batches);
    +exists                    EXISTS when kombu asks whether a queue exists
    +sadd +srem +smembers      declare its queue and mailbox (kombu's binding sets and permanent sets),
    +zadd +zrem +zrange        look up where a reply or a restored batch goes; kombu's binding deadlines and
    +zrangebyscore +evalsha    sweep (a Lua script: EVALSHA, EVAL, SCRIPT LOAD/EXISTS, TIME) are for expiring
    +eval +script|load         queues, which a confined worker has none of (its mailbox does not expire)
    +script|exists +time
    +hset +hget +hdel          late acks: its unacked hash and index zset (kombu's QoS) under MULTI/EXEC,
    +multi +exec +discard      WATCH/SET NX/GET/DEL/PEXPIRE for the mutex around restoring them
    +watch +unwatch +set
    +get +del +pexpire
    +setex +expire             store a result (expiring)
    +psubscribe +subscribe     listen to the control broadcast (`probegate_close_run`, ping/inspect) on
    +punsubscribe +unsubscribe /DB.celery.pidbox
    ~Q*                        its queue and priority lists, its unacked bookkeeping (Q.unacked,
                               Q.unacked_index, Q.unacked_mutex) and its results (Q.results.celery-task-meta-*):
                               key ids are fixed-length, so no other worker's queue starts with Q
    ~_kombu.binding.Q          its queue's binding, declared at start. Batches reach Q through the anonymous
    ~_kombu.binding_permanent.Q    exchange (exchange '', routing key Q), so no table routes them and a
                               restore pushes back onto Q without reading one: rebinding routes nothing
    ~*@*.celery.pidbox*        worker mailboxes (name@host.celery.pidbox): declared, never used for delivery
    ~_kombu.binding.celery.pidbox             the mailboxes' bindings to the control fanout (delivered by
    ~_kombu.binding_permanent.celery.pidbox   PUBLISH, so the table routes nothing)
    %R~_kombu.binding.reply.celery.pidbox     read-only: where a coordinator's ping/inspect wants replies
    (+lpush ~*.reply.celery.pidbox)           push a reply there, never read, empty or delete the queue
    %R~probegate:blob:*        read-only: the blob store (trees, fixtures, image chunks) and its names;
    %R~probegate:name:*        workers fetch by digest and never write there
    &/DB.celery.pidbox         the control fanout (kombu's fanout prefix is /DB.), to subscribe to only:
    (+publish                  PUBLISH lives in a selector of its own, on its own results' channels and
     &Q.results.celery-task-meta-*   the worker heartbeats (Celery's event dispatcher) alone, so a worker
     &/DB.celeryev*)                 cannot broadcast control commands (shutdown, revoke, close a run)

Everything else is denied: another worker's queue (BRPOP, LPUSH/RPUSH, DEL: NOPERM), the shared queue and
the image queues, another worker's results and the plain `celery-task-meta-*` keys, kombu's shared
`unacked`/`unacked_index`/`unacked_mutex`, another queue's bindings, the books (`probegate:books:*`), blob
writes, KEYS/SCAN, FLUSH*, CONFIG, ACL, CLIENT KILL, MONITOR, and every other user's connections.

It cannot move another worker's batch through kombu's restore either: a confined worker's unacked
bookkeeping is its own (Q.unacked*), the shared `unacked` hash is denied, and it may push onto Q alone.

What a hostile worker can still do with what it keeps, and why that buys no decision:
- Lie on its own batches (sign fabricated observations with its own key): bounded by its assigned share,
  and what cross-checks on another worker are for (docs/distributed.md).
- Drop, reorder or stall its own queue, or answer late: its batches are lost, and after the result timeout
  the coordinator sends them to another enrolled worker. A delay, never a verdict.
- Push fake replies onto a coordinator's reply queue (ping/inspect), e.g. naming a worker that is down, or
  flood it so other workers' replies miss the coordinator's one-second window: batches are then assigned to
  a worker that never answers (reassigned after the result timeout) or rest on fewer workers (`one_worker`
  on the card; a safety or contract row then has no cross-check and cannot pass). It cannot read, empty or
  delete the reply queue, nor unbind it.
- Rebind or empty other workers' mailboxes and their control-fanout bindings: control broadcasts go by
  PUBLISH to every subscriber, so nothing is routed through them.
- Publish Celery's worker heartbeats (nothing in probegate listens to them). probegate's own heartbeat is a
  key under Q (`Q.alive`, `Q.seen`: worker.celery.shared.beats), which no other worker's user can write, so
  no worker can keep another alive or pass for it; a worker may stop beating, which only moves its batches.

An invite's join user (`join_rules`) is another kind: it may push onto its own invite's request list and take
a reply (GETDEL) under `probegate:join:reply:*`, nothing else (worker.celery.shared.joinkeys).
"""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

import redis

from worker.celery.shared.app import direct_queue
from worker.celery.shared.broker import broker_call, with_user
from worker.celery.shared.joinkeys import join_user, reply_key, request_list
from worker.celery.shared.results import result_place

USER_PREFIX = "probegate-worker-"
COMMANDS = str.split(
    "+ping +client|setname +select "
    "+brpop +rpop +lpush +rpush +llen +lrange +exists "
    "+sadd +srem +smembers +zadd +zrem +zrange +zrangebyscore +evalsha +eval +script|load +script|exists +time "
    "+hset +hget +hdel +multi +exec +discard +watch +unwatch +set +get +del +pexpire "
    "+setex +expire "
    "+psubscribe +subscribe +punsubscribe +unsubscribe"
)
# The control plane (Celery's pidbox): every worker's mailbox and the bindings of the mailboxes to the control
# fanout, then read-only: where a coordinator's ping/inspect wants its replies, and the blob store.
SHARED_KEYS = [
    "~*@*.celery.pidbox*",
    "~_kombu.binding.celery.pidbox",
    "~_kombu.binding_permanent.celery.pidbox",
    "%R~_kombu.binding.reply.celery.pidbox",
    "%R~probegate:blob:*",
    "%R~probegate:name:*",
]
# Replies to a coordinator's ping/inspect: pushed onto its reply queue, which the worker can neither read,
# empty nor delete.
REPLIES = "(+lpush ~*.reply.celery.pidbox)"


def acl_user(name: str) -> str:
    """The ACL user of the worker enrolled as `name`."""
    return USER_PREFIX + name


def worker_rules(db: int, password: str, key_id: str) -> list[str]:
    """The ACL SETUSER arguments for the worker whose signing key is `key_id`, on database `db` (the module
    docstring says why each is there)."""
    queue = direct_queue(key_id)
    own = [f"~{queue}*", f"~_kombu.binding.{queue}", f"~_kombu.binding_permanent.{queue}"]
    publish = f"(+publish &{result_place(queue)}celery-task-meta-* &/{db}.celeryev*)"
    channels = [f"&/{db}.celery.pidbox", publish]
    return ["reset", "on", f">{password}", "resetchannels", *COMMANDS, *own, *SHARED_KEYS, REPLIES, *channels]


def join_rules(secret_sha256: str, invite_id: str) -> list[str]:
    """The ACL SETUSER arguments for an invite's join user: push onto its invite's request list (write-only: it
    cannot read or empty it, so no holder of the token sees another server's request) and take a reply
    (GETDEL, in a selector of its own: the reply keys take nothing else), named by a request digest only the
    asking server knows, and sealed. The password is set by its sha256: the coordinator never holds the token's
    secret after printing it."""
    return [
        *("reset", "on", f"#{secret_sha256}", "resetchannels"),
        *("+ping", "+client|setname", "+select", "+rpush", f"%W~{request_list(invite_id)}"),
        f"(+getdel ~{reply_key('*')})",
    ]


def create_join_user(admin_url: str, invite_id: str, secret_sha256: str) -> tuple[str, bool]:
    """Create the join user of invite `invite_id`; (the user, whether the server's ACL file keeps it)."""
    user = join_user(invite_id)
    with broker_call("creating the invite's join user"):
        client = redis.Redis.from_url(admin_url)
        try:
            client.execute_command("ACL", "SETUSER", user, *join_rules(secret_sha256, invite_id))
            return user, saved(client)
        finally:
            client.close()


def _db(url: str) -> int:
    path = urlsplit(url).path.strip("/")
    return int(path) if path.isdigit() else 0


def create_worker_user(admin_url: str, name: str, key_id: str) -> tuple[str, str, bool]:
    """Create (or reset) the ACL user of `name`, whose signing key is `key_id`, with a new password; returns
    (user, the worker's broker URL, whether the server's ACL file now keeps it across a restart)."""
    user, password, kept = make_worker_user(admin_url, name, key_id)
    return user, with_user(admin_url, user, password), kept


def make_worker_user(admin_url: str, name: str, key_id: str) -> tuple[str, str, bool]:
    """Create (or reset) the ACL user of `name` with a new password: (user, password, kept across a restart)."""
    user, password = acl_user(name), secrets.token_urlsafe(32)
    with broker_call("creating the worker's ACL user"):
        client = redis.Redis.from_url(admin_url)
        try:
            client.execute_command("ACL", "SETUSER", user, *worker_rules(_db(admin_url), password, key_id))
            kept = saved(client)
        finally:
            client.close()
    return user, password, kept


def delete_user(admin_url: str, user: str) -> tuple[int, bool]:
    """Delete the ACL user (a worker's or an invite's) and close every connection it holds now; returns how many
    were closed and whether the server's ACL file now forgets it too (else a restart of a server that loads one
    would bring it back)."""
    with broker_call(f"deleting the broker user {user}"):
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
            return closed, saved(client)
        finally:
            client.close()


def saved(client: redis.Redis) -> bool:
    """ACL SAVE when the server loads its users from an ACL file (`aclfile`), so a user made or deleted now
    stays so after a restart; False when it keeps none (or CONFIG is denied, as on managed services)."""
    try:
        found = client.config_get("aclfile").get("aclfile")
    except redis.exceptions.ResponseError:
        return False
    if not found:
        return False
    client.execute_command("ACL", "SAVE")
    return True
