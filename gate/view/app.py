"""The `gate view` application: its routes, its static files, and the stream a live run's page reads
(server-sent events: the rows as JSON while the journal or its progress file changes, a property's SPRT
path as element data the page's script builds, then the card's address once it is written). Read-only:
no route writes anything, and every file is opened for reading alone."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from gate.core.report.html_dom import STYLE
from gate.view.guard import Guard
from gate.view.live import LiveRun, journals, read_live
from gate.view.pages import Pages
from gate.view.sources import Options, Sources

_STATIC = {"view.css": "text/css", "live.js": "text/javascript"}


def _static(request: Request) -> Response:
    name = request.path_params["name"]
    if name == "report.css":  # the HTML report's own style sheet, served as a file: no inline style runs
        return Response(STYLE, media_type="text/css")
    if name not in _STATIC:
        return PlainTextResponse("not found\n", status_code=404)
    text = files("gate.view").joinpath("static", name).read_text(encoding="utf-8")
    return Response(text, media_type=_STATIC[name], headers={"Cache-Control": "no-cache"})


def _event(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


def _rows(run: LiveRun) -> str:
    rows: list[dict[str, Any]] = [{"property": row.property_id, **row.cells, "path": None} for row in run.rows]
    if any(row.path for row in run.rows):
        from gate.view.plots import as_tree, live_path

        for slot, (shown, row) in enumerate(zip(rows, run.rows, strict=True)):
            if row.path is not None:
                shown["path"] = as_tree(live_path(slot, row.property_id, row.path))
    return json.dumps({"total": run.total, "rows": rows, "problem": run.problem})


class LiveStream:
    """The events of one live page: rows whenever the journal changes, the card's address when it exists."""

    def __init__(self, pages: Pages, options: Options) -> None:
        self.pages, self.options = pages, options

    def _journal(self, key: str) -> LiveRun | None:
        for path in journals(self.pages.sources.journal_dir):
            run = read_live(path)
            if run.key == key:
                return run
        return None

    async def events(self, request: Request, key: str) -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"
        shown, run_id = "", ""
        ends = time.monotonic() + self.options.stream_s
        while time.monotonic() < ends and not await request.is_disconnected():
            run = await run_in_threadpool(self._journal, key)
            run_id = run.run_id if run is not None and run.run_id else run_id
            if run is not None and (data := _rows(run)) != shown:
                shown = data
                yield _event("rows", data)
            if run_id and (run is None or run.committed):
                card = await run_in_threadpool(self.pages.index.by_run_id, run_id)
                if card is not None:
                    yield _event("card", f"/run/{card.key}")
                    return
            if run is None and not run_id:
                yield _event("gone", "no run in progress under this key")
                return
            await asyncio.sleep(self.options.poll_s)

    def respond(self, request: Request) -> Response:
        """The stream of the live page the path names."""
        key = request.path_params["key"]
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(self.events(request, key), media_type="text/event-stream", headers=headers)


def build_app(sources: Sources, options: Options | None = None) -> Guard:
    """The ASGI application over `sources`, wrapped in its guard (headers, token, loopback hosts)."""
    options = options or Options()
    pages = Pages(sources)
    routes = [
        Route("/", pages.runs),
        Route("/run/{key:str}", pages.run),
        Route("/live/{key:str}", pages.live),
        Route("/live/{key:str}/events", LiveStream(pages, options).respond),
        Route("/compare", pages.compare),
        Route("/property", pages.property),
        Route("/flakes", pages.flakes),
        Route("/fleet", pages.fleet),
        Route("/static/{name:str}", _static),
    ]
    app = Starlette(routes=routes)
    return Guard(app, token=options.token, loopback_hosts=options.loopback_hosts)
