"""What every response carries and every request must show: the CSP and nosniff headers, the token on a
bind that is not loopback, and a loopback bind answering only requests addressed to loopback."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from support.viewsite import Site, sources

from gate.view.app import build_app
from gate.view.guard import COOKIE, CSP, is_loopback
from gate.view.sources import Options

PAGES = ["/", "/compare", "/flakes", "/fleet", "/property?id=x", "/static/view.css", "/static/live.js", "/nope"]


@pytest.mark.parametrize("url", PAGES)
def test_every_response_carries_the_csp_and_nosniff(client: TestClient, url: str) -> None:
    response = client.get(url)
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_csp_runs_no_inline_script_or_style() -> None:
    directives = dict(d.strip().split(" ", 1) for d in CSP.split(";"))
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP


def test_a_request_to_another_host_name_is_refused_on_loopback(client: TestClient) -> None:
    """A page elsewhere reaching the view through a rebound DNS name is refused."""
    assert client.get("/", headers={"host": "evil.example:8765"}).status_code == 403
    assert client.get("/", headers={"host": "localhost:8765"}).status_code == 200


def test_a_non_loopback_bind_refuses_a_request_without_the_token(site: Site) -> None:
    app = build_app(sources(site), Options(token="s3cret-token"))
    with TestClient(app, base_url="http://192.0.2.7:8765") as web:
        refused = web.get("/")
        assert refused.status_code == 403 and "token" in refused.text
        assert refused.headers["content-security-policy"] == CSP
        assert web.get("/?token=wrong").status_code == 403
        web.cookies.set(COOKIE, "wrong")
        assert web.get("/").status_code == 403
        web.cookies.clear()
        first = web.get("/?token=s3cret-token")
        assert first.status_code == 200
        assert "HttpOnly" in first.headers["set-cookie"] and "SameSite=Strict" in first.headers["set-cookie"]
        assert web.get("/flakes").status_code == 200  # the cookie carries it from here


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                                 ("127.0.0.2", True), ("0.0.0.0", False), ("192.0.2.7", False),
                                                 ("example.org", False)])  # fmt: skip
def test_which_binds_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
