"""What every response of `gate view` carries and every request must show: a Content-Security-Policy
that runs no inline script or style (the pages quote the patch's text), `nosniff`, no framing; and,
on a bind other than loopback, the token printed at start (a query parameter once, then a cookie).
A loopback bind answers only requests addressed to a loopback name, so a page elsewhere cannot reach
it through a rebound DNS name."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
COOKIE = "gate_view_token"
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, as --host takes it) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return ""


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """The ASGI middleware around the view's app."""

    def __init__(self, app: App, *, token: str | None, loopback_hosts: frozenset[str]) -> None:
        self.app, self.token, self.hosts = app, token, loopback_hosts

    def _given(self, scope: Scope) -> tuple[bool, bool]:
        """Whether the request shows the token, and whether it came in the query (a cookie is then set)."""
        assert self.token is not None
        query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1")).get("token", [])
        if any(hmac.compare_digest(value.encode(), self.token.encode()) for value in query):
            return True, True
        cookie = SimpleCookie()
        try:
            cookie.load(_header(scope, b"cookie"))
        except Exception:  # a malformed cookie header shows no token
            return False, False
        morsel = cookie.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), self.token.encode()), False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        set_cookie = False
        if self.token is None:
            allowed = _host_name(_header(scope, b"host")) in self.hosts
            why = b"refused: this server answers only requests to a loopback address\n"
        else:
            allowed, set_cookie = self._given(scope)
            why = b"refused: pass the token `gate view` printed at start (?token=...)\n"
        if not allowed:
            await _refuse(send, why)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *HEADERS]
                if set_cookie and self.token is not None:
                    value = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                    headers.append((b"set-cookie", value.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, guarded)


async def _refuse(send: Send, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()), *HEADERS]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})
