"""A live run's sequential paths, an SPRT's and the paired test's: drawn from the run's progress file (the
suite's rule, each judged trial's outcome on each tree) by the report's own plots, sent down the stream as
element data as waves are judged, and left out, never a traceback, when the file is garbled or planted."""

from __future__ import annotations

import json

from starlette.testclient import TestClient
from support.mini_suite import STAT
from support.viewsite import HOSTILE, Site, events, page

from gate.core.report.html_dom import html_text, num
from gate.core.report.html_paired import paired_path
from gate.core.report.html_sprt import sprt_path
from gate.core.suite.trial import Side
from gate.core.verdicts.bands import SprtRule
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import Outcome, OutcomeKind
from gate.io.liveprogress import ProgressFile, progress_path
from gate.view.live import read_live
from gate.view.plots import as_tree, live_path

RULE = SprtRule(p0=0.8, p1=0.6, max_trials=40, wave=5)
SLOT = 2  # STAT is the third property of the live run


def judged(site: Site, kinds: list[OutcomeKind], planned: int = 5) -> ProgressFile:
    """The run's progress file with STAT under RULE, its trials 0.. judged as `kinds`."""
    progress = ProgressFile(progress_path(site.journal), sprt={STAT: RULE}, every_s=0)
    progress.planned(STAT, planned)
    for index, kind in enumerate(kinds):
        progress.done(STAT, kind, index)
    return progress


def find(tree: list, tag: str) -> list:
    """Every element of an `as_tree` tree with this tag, depth first."""
    found = [tree] if tree[0] == tag else []
    for child in tree[3]:
        found += find(child, tag)
    return found


def test_the_live_page_draws_the_path_the_card_page_would(client: TestClient, site: Site) -> None:
    """Three judged trials: the page's `svg#sprt-2` holds the report's path of those outcomes, point for point,
    with its bounds and where it stands; the other properties get no plot."""
    kinds = [OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.MISS]
    judged(site, kinds)
    expected = sprt_path(RULE, [Outcome(trial_index=i, kind=k) for i, k in enumerate(kinds)])
    key = read_live(site.journal).key
    html, parsed = page(client, f"/live/{key}")
    (group,) = parsed.by_class("sprt-path")
    assert group["data-property"] == STAT and group["data-trials"] == "3" and group["data-hits"] == "1"
    assert group["data-final-llr"] == num(RULE.llr(1, 3)) == num(expected.final)
    assert group["data-upper"] == num(RULE.upper) and group["data-decision"] == "open"
    (polyline,) = parsed.by_class("llr")
    assert len((polyline["points"] or "").split()) == len(expected.points) == 3
    assert parsed.by_id(f"sprt-{SLOT}")["role"] == "img" and "1/3 hits (p0 0.8, p1 0.6), llr so far 1.099" in html
    assert len(parsed.by_class("live-path")) == 1


def test_the_stream_carries_the_path_as_it_grows(client: TestClient, site: Site) -> None:
    """The next wave's judged trials reach the stream: the row's `path` is the plot as element data, with one
    more point per trial, and no markup in any of its texts."""
    progress = judged(site, [OutcomeKind.HIT] * 5)
    key = read_live(site.journal).key
    (name, data), *_ = events(client, f"/live/{key}/events")
    first = {r["property"]: r for r in json.loads(data)["rows"]}
    assert name == "rows" and first[STAT]["path"] is not None
    assert {r["path"] is None for pid, r in first.items() if pid != STAT} == {True}
    progress.planned(STAT, 10)
    for index in range(5, 8):
        progress.done(STAT, OutcomeKind.MISS, index)
    (_, data), *_ = events(client, f"/live/{key}/events")
    tree = {r["property"]: r for r in json.loads(data)["rows"]}[STAT]["path"]
    assert tree[0] == "div" and tree[1]["id"] == f"live-path-{SLOT}"
    (group,) = find(tree, "g")
    assert group[1]["data-trials"] == "8" and group[1]["data-final-llr"] == num(RULE.llr(5, 8))
    (polyline,) = find(tree, "polyline")
    assert len(polyline[1]["points"].split()) == 8


def test_a_hostile_property_id_is_text_in_the_plot_and_its_data() -> None:
    """An id that is markup stays one line of text: in the page's fragment it is escaped, in the stream's
    element data it is the label's text, for the script to set as text."""
    from gate.core.report.html_dom import fragment
    from gate.core.report.html_sprt import kinds_path

    box = live_path(0, HOSTILE, kinds_path(RULE, [OutcomeKind.MISS]))
    markup = fragment(box)
    assert "<script" not in markup and "<img" not in markup and "&lt;script&gt;" in markup
    labels = [node[2] for node in find(as_tree(box), "text") if node[1].get("class") == "label"]
    assert labels == [html_text(HOSTILE, 60)]


def test_a_planted_progress_file_with_a_lying_sprt_shows_no_rate_and_no_path(client: TestClient, site: Site) -> None:
    """Outcomes that claim more hits than the counts (a planted or garbled file) show as no rate and no plot:
    the page and the stream answer, never a traceback."""
    document = {
        "properties": {
            STAT: {"planned": 5, "judged": 1, "hits": 1, "sprt": RULE.model_dump(mode="json"), "outcomes": "hhhhh"}
        }
    }
    progress_path(site.journal).write_text(json.dumps(document))
    live = read_live(site.journal)
    row = next(r for r in live.rows if r.property_id == STAT)
    assert row.cells["hit_rate"] == "-" and row.path is None
    _, parsed = page(client, f"/live/{live.key}")
    assert parsed.by_class("sprt-path") == [] and "hidden" in parsed.by_id("live-paths")
    (name, data), *_ = events(client, f"/live/{live.key}/events")
    assert name == "rows" and all(r["path"] is None for r in json.loads(data)["rows"])


def test_a_paired_property_shows_the_path_of_the_pairs_judged_on_both_trees(client: TestClient, site: Site) -> None:
    """Pairs judged on both trees: the page's `svg#paired-2` holds the report's paired path of those outcomes,
    a trial judged on one tree only makes no point yet, and the stream carries the same plot as data."""
    rule = PairedRule(margin=0.2, max_pairs=40, wave=5)
    progress = ProgressFile(progress_path(site.journal), paired={STAT: rule}, every_s=0)
    progress.planned(STAT, 10)
    base = [OutcomeKind.HIT, OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.HIT]
    patch = [OutcomeKind.HIT, OutcomeKind.MISS, OutcomeKind.MISS, OutcomeKind.HIT, OutcomeKind.HIT]  # 4: base not yet
    for index, kind in enumerate(base):
        progress.done(STAT, kind, index, Side.BASE)
    for index, kind in enumerate(patch):
        progress.done(STAT, kind, index)
    expected = paired_path(
        rule,
        [Outcome(trial_index=i, kind=k) for i, k in enumerate(base)],
        [Outcome(trial_index=i, kind=k) for i, k in enumerate(patch)],
    )
    assert len(expected.points) == 4 and expected.counts.base_only == 1
    key = read_live(site.journal).key
    html, parsed = page(client, f"/live/{key}")
    (group,) = parsed.by_class("paired-path")
    assert group["data-property"] == STAT and group["data-pairs"] == "4"
    assert group["data-final-llr"] == num(expected.final) and group["data-upper"] == num(rule.upper)
    assert parsed.by_id(f"paired-{SLOT}")["role"] == "img" and "So far: " in html
    (_, data), *_ = events(client, f"/live/{key}/events")
    tree = {r["property"]: r for r in json.loads(data)["rows"]}[STAT]["path"]
    assert tree[1]["id"] == f"live-path-{SLOT}" and find(tree, "svg")[0][1]["id"] == f"paired-{SLOT}"
    (polyline,) = find(tree, "polyline")
    assert len(polyline[1]["points"].split()) == 4
