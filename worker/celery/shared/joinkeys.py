"""Where a join request and its reply live on the broker (gate.core.trust.invites says what they hold).

A joining server pushes its signed request onto its invite's own list, which only that invite's join user may
write (worker.celery.coordinator.acl.join_rules) and only the coordinator reads; the coordinator's admission
(worker.celery.coordinator.admitter) writes the reply under the request's digest, which the joining server
polls: a sealed grant, or a refusal that says why.
"""

from __future__ import annotations

JOIN_USER_PREFIX = "probegate-join-"
REPLY_TTL_S = 600  # a reply waits this long for its server (it is sealed: only that server can open a grant)
MAX_REQUEST_BYTES = 4096  # a request is about 1 KB; anything much larger is refused unread


def join_user(invite_id: str) -> str:
    """The broker user a join token logs in as."""
    return JOIN_USER_PREFIX + invite_id


def request_list(invite_id: str) -> str:
    """The list an invite's join requests are pushed onto."""
    return f"probegate:join:{invite_id}:requests"


def reply_key(request_digest: str) -> str:
    """Where the reply to the request of digest `request_digest` is written."""
    return f"probegate:join:reply:{request_digest}"
