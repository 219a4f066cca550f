"""Per-worker broker credentials: one Redis ACL user per worker, which may take batches only from its own
direct queue (Q, probegate.direct.<its key id>) and write only its own results, and one join user per invite.
Why each rule is there, what is denied and what a hostile worker can still do: docs/explanation/trust.md, "A worker's
broker user, rule by rule"."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

import redis

from worker.celery.shared.app import direct_queue
from worker.celery.shared.broker import broker_call, with_user
from worker.celery.shared.joinkeys import join_user, reply_key, request_list
from worker.celery.shared.results import result_place

USER_PREFIX = "probegate-worker-"
COMMANDS = [
    *("+ping", "+client|setname"),  # health checks; Celery names its connections
    "+select",  # the URL's /DB: kombu and the result backend select it on connect
    *("+brpop", "+rpop"),  # take batches off Q (RPOP when kombu polls)
    *("+lpush", "+rpush"),  # put one back: warm shutdown, restoring its own unacked batches
    *("+llen", "+lrange"),  # kombu sizes and reads a queue
    "+exists",  # kombu asks whether a queue exists
    *("+sadd", "+srem", "+smembers"),  # declare its queue and mailbox (kombu's binding sets)
    # kombu's binding deadlines and their sweep (a Lua script), for expiring queues, which it has none of
    *("+zadd", "+zrem", "+zrange", "+zrangebyscore", "+evalsha", "+eval", "+script|load", "+script|exists"),
    "+time",
    # late acks: its unacked hash and index (kombu's QoS) under MULTI/EXEC, and the mutex around restoring them
    *("+hset", "+hget", "+hdel", "+multi", "+exec", "+discard", "+watch", "+unwatch"),
    *("+set", "+get", "+del", "+pexpire"),
    *("+setex", "+expire"),  # store a result, expiring
    # listen to the control broadcast (`probegate_close_run`, ping/inspect) on /DB.celery.pidbox
    *("+psubscribe", "+subscribe", "+punsubscribe", "+unsubscribe"),
]
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
    """The ACL SETUSER arguments for the worker whose signing key is `key_id`, on database `db`
    (docs/explanation/trust.md says why each is there)."""
    queue = direct_queue(key_id)
    # Its queue, priority lists, unacked bookkeeping and results (key ids are fixed-length: no other worker's
    # queue starts with Q), and its queue's bindings.
    own = [f"~{queue}*", f"~_kombu.binding.{queue}", f"~_kombu.binding_permanent.{queue}"]
    # PUBLISH only on its own results' channels and Celery's heartbeats: never a control command.
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
