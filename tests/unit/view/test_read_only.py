"""The view writes nothing: after every page (and a live stream) the cards, the journal and every other
file under its folders have the bytes and modification times they had."""

from __future__ import annotations

import os
from pathlib import Path

from starlette.testclient import TestClient
from support.viewsite import Site, keys


def snapshot(*folders: Path) -> dict[Path, tuple[bytes, int]]:
    return {
        path: (path.read_bytes(), os.stat(path).st_mtime_ns)
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_visiting_every_page_changes_no_file(client: TestClient, site: Site) -> None:
    before = snapshot(site.cards, site.state)
    found = keys(client)
    live = next(p for p in client.get("/").text.split('"') if p.startswith("/live/"))
    urls = ["/", "/?status=blocked", "/compare", "/flakes", "/fleet", "/property?id=invoice_total", live,
            f"{live}/events", f"/compare?a={found['run-test-0001']}&b={found['run-test-0002']}",
            *(f"/run/{key}" for key in found.values())]  # fmt: skip
    for url in urls:
        assert client.get(url).status_code == 200, url
    assert snapshot(site.cards, site.state) == before
