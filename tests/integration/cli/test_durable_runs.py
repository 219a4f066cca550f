"""Durable runs through the real sandbox: a `gate run` SIGKILLed halfway through a long statistical run
and resumed with `--resume` re-runs only what its journal lacks and writes the rows an uninterrupted run
writes, with the books recording one run; a journal edited to claim hits, or bound to another tree, is
refused with exit 65 and nothing written. Each waits for the journal to reach a line count, never a time."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gate_runs import EXAMPLE, NOISY_SEEDS, UNENROLLED
from support.servers import RedisServer, Workers

from gate.core.suite.journal import chained
from gate.io.journal import journal_path

pytestmark = pytest.mark.integration

RUN = [sys.executable, "-m", "gate.cli", "--log-level", "warning", "run"]
# The long run: the noisy sampler's tool choice (a draw per trial seed, so hits are not all-or-nothing;
# every run here replays the seeds of one run id, so an uninterrupted run draws the same) over this many trials.
# 2,000 (the count) took about 150 s a run on this 2-core machine under load (December 2026), and the
# test runs two runs' worth (killed + resumed, then uninterrupted): 800 took 500 s in a CI run beside other
# work. The default is 200, enough for the kill (when the journal holds 100 lines) to land halfway through many
# batches of a statistical row, and for the test to spend well under a minute of a CI run;
# (100 is too few here: on a quiet machine the local run journaled every trial before the kill landed.)
# PROBEGATE_DURABLE_TRIALS=2000 runs the count (it passed: 296 s for the whole test on a quiet machine).
TRIALS = int(os.environ.get("PROBEGATE_DURABLE_TRIALS", "200"))
WAIT_S = 240.0  # the longest a test waits for the journal to grow to half the run (a loaded 2-core machine)


def long_suite(folder: Path, trials: int) -> Path:
    """The invoice example with its statistical property run `trials` times (fixed N, 80% to pass)."""
    folder.mkdir(parents=True)
    text = (EXAMPLE / "gate.toml").read_text()
    suite = folder / "gate.toml"
    suite.write_text(text.replace("trials = 10\nmin_hits = 8\n", f"trials = {trials}\nmin_hits = {trials * 4 // 5}\n"))
    for name in ("checks.py", "flake-freeze.json"):
        shutil.copy(EXAMPLE / name, folder / name)
    return suite


def run_cmd(folder: Path, patch: str = "noisy_sampler", *extra: str) -> list[str]:
    """`gate run` of one of the example's patches with the long suite, its card and books in `folder`."""
    return [
        *RUN,
        *("--suite", str(folder / "gate.toml"), "--workdir", str(EXAMPLE / "patches" / patch)),
        *("--fixture", str(EXAMPLE / "fixtures"), "--seal", str(EXAMPLE / ".fixture-seal")),
        *("--card", str(folder / "card.json"), "--ledger", str(folder / "ledger.json"), "--new-ledger"),
        *NOISY_SEEDS,
        *extra,
    ]


def journal_of(folder: Path) -> Path:
    """The journal of the run writing `folder`'s card (in the state folder tests/conftest.py sets)."""
    return journal_path(folder / "card.json", Path(os.environ["PROBEGATE_STATE_DIR"]))


def killed_halfway(folder: Path, trials: int, *extra: str, env: dict[str, str] | None = None) -> int:
    """Start the run, SIGKILL it once its journal holds half the trials; returns the lines it held then."""
    cmd = run_cmd(folder, "noisy_sampler", *extra)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    journal, lines = journal_of(folder), 0
    deadline = time.monotonic() + WAIT_S
    try:
        while lines < trials // 2:
            assert proc.poll() is None, f"the run ended before it was killed:\n{proc.communicate()[1][-3000:]}"
            assert time.monotonic() < deadline, f"the journal never reached {trials // 2} lines (has {lines})"
            lines = journal.read_bytes().count(b"\n") if journal.exists() else 0
            time.sleep(0.05)  # polling the file: the event is the line count, this is only the poll's pace
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return lines


def rows(card: dict) -> dict[str, tuple[str, int, int]]:
    return {r["id"]: (r["kind"], r["hits"], r["trials"]) for r in card["properties"]}


def test_a_run_killed_halfway_resumes_and_writes_the_uninterrupted_rows(tmp_path: Path, sandbox_image: str) -> None:
    """SIGKILLed halfway through a long run (PROBEGATE_DURABLE_TRIALS: 200 trials by default; 2,000 passed in
    296 s for the whole test on a quiet machine) and resumed:
    stderr states the trials reused and re-run (some, not all), the rows equal an uninterrupted run's, and
    the books (started new by the resume itself) record the run once."""
    killed_and_resumed(tmp_path, TRIALS)


def test_a_run_through_celery_killed_halfway_resumes_the_same(
    workers: Workers, redis_server: RedisServer, tmp_path: Path
) -> None:
    """The same through two gate-workers (`--broker`; PROBEGATE_DURABLE_CELERY_TRIALS, default 60): the
    journal is the coordinator's, so a resumed coordinator reuses what it stored and sends the rest (64 trials
    make 8 batches of 8 over two processes, as 124 made 8 of 16: the kill still lands among batches)."""
    workers.start("w1")
    workers.start("w2")
    workers.wait_ready()
    trials = int(os.environ.get("PROBEGATE_DURABLE_CELERY_TRIALS", "60"))
    killed_and_resumed(tmp_path, trials, "--broker", redis_server.url, UNENROLLED, env=workers.env)


def killed_and_resumed(tmp_path: Path, trials: int, *extra: str, env: dict[str, str] | None = None) -> None:
    """The long run killed halfway and resumed, checked against the same run left alone."""
    cut, whole = tmp_path / "cut", tmp_path / "whole"
    long_suite(cut, trials), long_suite(whole, trials)
    held = killed_halfway(cut, trials, *extra, env=env)
    assert not (cut / "card.json").exists() and not (cut / "ledger.json").exists()
    resume = run_cmd(cut, "noisy_sampler", *extra, "--resume")
    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=600, env=env)
    assert "Traceback" not in resumed.stderr, resumed.stderr
    said = re.search(r"resumed run (\w+): (\d+) trial\(s\) reused, (\d+) re-run", resumed.stderr)
    assert said, resumed.stderr[-3000:]
    reused, rerun = int(said[2]), int(said[3])
    total = trials + 4  # the four safety and contract properties run once each
    assert reused + rerun == total and 0 < rerun < total and reused >= held - 2  # header, a torn line
    alone = run_cmd(whole, "noisy_sampler", *extra)
    uninterrupted = subprocess.run(alone, capture_output=True, text=True, timeout=600, env=env)
    card, reference = json.loads((cut / "card.json").read_text()), json.loads((whole / "card.json").read_text())
    assert resumed.returncode == uninterrupted.returncode, resumed.stderr[-3000:]
    assert rows(card) == rows(reference)
    assert card["run_id"] == said[1] and not journal_of(cut).exists()
    refold = subprocess.run([*RUN[:-1], "refold", str(cut / "card.json")], capture_output=True, text=True, timeout=120)
    assert refold.returncode == 0, refold.stdout + refold.stderr  # the kept evidence re-folds to the card's rows
    books, expected = json.loads((cut / "ledger.json").read_text()), json.loads((whole / "ledger.json").read_text())
    assert books["sampler_window"] == expected["sampler_window"] and len(books["sampler_window"]) == 1


def edited(journal: Path, edit: str) -> None:
    """The journal after an edit that would make the resumed run pass or look like another tree's."""
    data = journal.read_bytes()
    lines = [json.loads(text) for text in data[: data.rfind(b"\n") + 1].splitlines()]  # a torn line dropped
    if edit == "line":  # a stored miss of the sampler (another tool chosen) turned into a hit
        hit = next(ln for ln in lines[1:] if ln["property"] == "tool_choice_rate" and b"issue_refund" in _out(ln))
        miss = next(ln for ln in lines[1:] if ln["property"] == "tool_choice_rate" and b"issue_refund" not in _out(ln))
        miss["observation"]["stdout"] = hit["observation"]["stdout"]
    elif edit == "foreign":  # a line of a trial this run never plans, chained properly
        body = json.loads(json.dumps({k: v for k, v in lines[-1].items() if k != "chain"}))
        body["index"] = body["observation"]["trial_index"] = 10**6
        lines.append({**body, "chain": chained(lines[-1]["chain"], body)})
    else:  # a header for another tree, the whole journal chained again
        lines[0]["tree"] = "0" * 64
        chain = ""
        for line in lines:
            line["chain"] = chain = chained(chain, {k: v for k, v in line.items() if k != "chain"})
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _out(line: dict) -> bytes:
    import base64

    return base64.urlsafe_b64decode(line["observation"]["stdout"]["data"])


@pytest.fixture(scope="module")
def killed_once(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Path:
    """One long run killed halfway, its folder and journal kept for the edit tests to copy (each edits its own)."""
    folder = tmp_path_factory.mktemp("killed") / "run"
    long_suite(folder, TRIALS)
    killed_halfway(folder, TRIALS)
    return folder


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("line", "does not follow from the lines before it"),
        ("foreign", "is not a trial of this run"),
        ("header", "not this run's journal: its patched tree is"),
    ],
)
@pytest.mark.xdist_group("edited_journal")  # one worker, so the killed run is made once
def test_an_edited_journal_is_refused_and_nothing_written(
    killed_once: Path, tmp_path: Path, edit: str, said: str
) -> None:
    """A journal edited to claim hits (a line changed, a foreign line added, a header for another tree)
    is refused with exit 65 in one line naming it; no card, no books, the journal left as it was."""
    folder = tmp_path / "run"
    shutil.copytree(killed_once, folder)
    journal = journal_of(folder)  # the copy's own journal: the same lines, kept under this card's path
    journal.write_bytes(journal_of(killed_once).read_bytes())
    edited(journal, edit)
    before = journal.read_bytes()
    done = subprocess.run(run_cmd(folder, "noisy_sampler", "--resume"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 65, done.stderr[-3000:]
    [line] = [ln for ln in done.stderr.splitlines() if ln.startswith("gate: error:")]
    assert str(journal) in line and said in line, done.stderr
    assert "Traceback" not in done.stderr
    assert not (folder / "card.json").exists() and not (folder / "ledger.json").exists()
    assert journal.read_bytes() == before
