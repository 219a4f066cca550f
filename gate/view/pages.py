"""The view's pages: each reads its sources, builds what the template shows and renders it with
autoescaping on. Everything a card or journal holds is text to the templates; the only markup placed
as it is comes from the report's escaping builder (`gate.core.report.html_dom`)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from gate.core.errors import GateError
from gate.core.escaping import one_line
from gate.view.index import CardIndex
from gate.view.live import FIELDS, journals, read_live
from gate.view.sources import Sources

if TYPE_CHECKING:
    from gate.core.policy.history import LiftProposal
    from gate.view.cards import CardCache

# The card models, the report and the plots load with the first page that shows a card, not at start:
# the runs page needs only the index's few fields (benchmarks/view_start.py).

MAX_LISTED = 500  # a listing longer than this is cut (the filters narrow it)


def templates() -> Environment:
    """The templates, autoescaped whatever their name, and failing on a name the page did not give."""
    return Environment(
        loader=PackageLoader("gate.view", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
    )


def _short(text: str | None, n: int = 12) -> str:
    return one_line(text or "")[:n] or "-"


def _shown(value: object) -> str:
    from gate.core.card.carddiff import show_value

    return show_value(value)  # type: ignore[arg-type]


class Pages:
    """The handlers of every page, over one set of sources."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.index = CardIndex(sources.card_dirs)
        self._cards: CardCache | None = None
        self.env = templates()
        self.env.filters["short"] = _short
        self.env.filters["shown"] = _shown
        self.env.filters["basename"] = lambda path: one_line(str(path).rsplit("/", 1)[-1])

    @property
    def cards(self) -> CardCache:
        """The cards opened so far (made on first use)."""
        if self._cards is None:
            from gate.view.cards import CardCache

            self._cards = CardCache()
        return self._cards

    def render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        page = self.env.get_template(name).render(sources=self.sources, **context)
        return HTMLResponse(page, status_code=status, headers={"Cache-Control": "no-store"})

    def runs(self, request: Request) -> HTMLResponse:
        """Every card, newest first, filtered by suite, status and property; then the runs in progress."""
        want = {k: request.query_params.get(k, "") for k in ("suite", "status", "property")}
        found = self.index.runs()
        shown = [
            run
            for run in found
            if (not want["suite"] or run.suite == want["suite"])
            and (not want["status"] or run.status == want["status"])
            and (not want["property"] or want["property"] in run.properties)
        ]
        live = [read_live(path) for path in journals(self.sources.journal_dir)]
        return self.render(
            "runs.html",
            runs=shown[:MAX_LISTED],
            cut=max(0, len(shown) - MAX_LISTED),
            total=len(found),
            want=want,
            suites=sorted({r.suite for r in found if r.suite}),
            statuses=sorted({r.status for r in found if r.status}),
            live=[run for run in live if not run.committed],
        )

    def _missing(self, what: str) -> HTMLResponse:
        return self.render("missing.html", status=404, what=what)

    def run(self, request: Request) -> HTMLResponse:
        """One card: the HTML report's content, under the view's own style sheet."""
        from gate.core.report.html import draw_report
        from gate.core.report.html_dom import el, fragment
        from gate.view.cards import records

        run = self.index.find(request.path_params["key"])
        if run is None:
            return self._missing("no card listed under this key")
        if run.problem:
            return self.render("run.html", run=run, report=None, note=run.problem)
        try:
            card = self.cards.card(run)
        except GateError as exc:
            return self.render("run.html", run=run, report=None, note=one_line(exc.message))
        found, note = records(card, run.path)
        body = el(None, "div", id="report")
        draw_report(body, card, found)
        return self.render("run.html", run=run, report=Markup(fragment(body)), note=note)

    def live(self, request: Request) -> HTMLResponse:
        """A run in progress, from its journal and progress file; its stream keeps the rows and the sequential
        tests' paths current."""
        key = request.path_params["key"]
        path = next((p for p in journals(self.sources.journal_dir) if read_live(p).key == key), None)
        if path is None:
            return self._missing("no run in progress under this key (it may have finished: see the runs)")
        run = read_live(path)
        paths = []
        if any(row.path for row in run.rows):
            from gate.core.report.html_dom import fragment
            from gate.view.plots import live_path

            for slot, row in enumerate(run.rows):
                if row.path is not None:
                    paths.append(Markup(fragment(live_path(slot, row.property_id, row.path))))
        return self.render("live.html", run=run, fields=FIELDS, paths=paths)

    def compare(self, request: Request) -> HTMLResponse:
        """Two cards side by side: what `gate diff` finds, rows that changed kind first, intervals overlaid."""
        from gate.core.card.carddiff import diff_cards
        from gate.view.plots import compare_plot

        a, b = (self.index.find(request.query_params.get(side, "")) for side in ("a", "b"))
        if a is None or b is None:
            return self.render("compare.html", a=a, b=b, diff=None, rows=[], plot=None, note="pick two runs")
        try:
            card_a, card_b = self.cards.card(a), self.cards.card(b)
        except GateError as exc:
            return self.render("compare.html", a=a, b=b, diff=None, rows=[], plot=None, note=one_line(exc.message))
        diff = diff_cards(card_a, card_b)
        rows = sorted(diff.properties, key=lambda p: not any(c.field == "kind" for c in p.changes))
        first_b = {}
        for row in card_b.properties:
            first_b.setdefault(row.id, row)
        seen: set[str] = set()
        pairs = []
        for row in card_a.properties:
            if row.id not in seen:
                seen.add(row.id)
                pairs.append((row.id, row, first_b.get(row.id)))
        pairs += [(pid, None, row) for pid, row in first_b.items() if pid not in seen]
        # The paired rows' differences: how the pairs of base and patch trials came out on either side.
        paired = [(pid, ra.paired if ra else None, rb.paired if rb else None) for pid, ra, rb in pairs]
        paired = [(pid, pa, pb) for pid, pa, pb in paired if pa is not None or pb is not None]
        return self.render(
            "compare.html", a=a, b=b, diff=diff, rows=rows, plot=compare_plot(pairs), paired=paired, note=""
        )

    def property(self, request: Request) -> HTMLResponse:
        """One property across every listed run: its hit rate with intervals, colour changes, freezes,
        the proposals beside its cards and what the books recorded."""
        from gate.view.history import freeze_rows, history_of, property_points, proposals_for, read_source
        from gate.view.plots import history_plot

        pid = request.query_params.get("id", "")
        runs = self.index.runs()
        points, unreadable = property_points(runs, self.cards, pid)
        history = read_source(self.sources.history)
        freezes = read_source(self.sources.freezes)
        rows = [r for r in freeze_rows(freezes.value) if pid in r.entry.properties]
        return self.render(
            "property.html",
            pid=pid,
            points=points,
            unreadable=unreadable,
            plot=history_plot(points) if points else None,
            proposals=proposals_for(runs, pid),
            freezes=rows,
            freezes_problem=freezes.problem,
            history=history_of(history.value, pid),
            history_problem=history.problem,
        )

    def flakes(self, request: Request) -> HTMLResponse:
        """Open freezes with owners, expiry and cause; proposals awaiting an owner; lifts due."""
        from gate.view.history import freeze_rows, proposals_for, read_source

        freezes = read_source(self.sources.freezes)
        runs = self.index.runs()
        lifts: list[LiftProposal] = []
        if runs and not runs[0].problem:  # the newest run's lifts: later runs supersede earlier ones
            with contextlib.suppress(GateError):
                lifts = list(self.cards.card(runs[0]).lift_proposals)
        return self.render(
            "flakes.html",
            freezes=freeze_rows(freezes.value),
            problem=freezes.problem,
            proposals=proposals_for(runs),
            lifts=lifts,
        )

    def fleet(self, request: Request) -> HTMLResponse:
        """The enrolled workers (and, with a live reader, who is up)."""
        from gate.view.history import read_source

        summary, newest = None, ""
        runs = self.index.runs()
        if runs and not runs[0].problem:  # the disputes of the newest run: a worker caught there is shown so
            with contextlib.suppress(GateError):
                summary, newest = self.cards.card(runs[0]).cross_check, runs[0].run_id
        reader = self.sources.fleet
        workers = read_source((lambda: reader(summary)) if reader is not None else None)
        invites = read_source(self.sources.invites)
        return self.render(
            "fleet.html",
            workers=workers.value or [],
            problem=workers.problem,
            invites=invites.value or invites.problem,
            newest=newest if summary is not None else "",
        )
