"""The reviewers' view of the evidence (gate.core.report.evidence_view) and `gate evidence CARD`: which trials
are shown, what each carries, that hostile record text renders inert, and the command end to end; no Docker."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st
from support.mini_suite import CONTRACT, RUN_ID, SAFETY, STAT, Suite, build_suite, but, good, run

from gate.cli.main import main
from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord, record_digest
from gate.core.errors import RET_CONFIG, RET_OK, RET_USAGE
from gate.core.report.evidence_view import HEAD_CHARS, WRITES_SHOWN, Review, build_review, by_digest
from gate.core.suite.trial import Captured, FileChange, Observation
from gate.core.verdicts.verdict import Outcome, OutcomeKind

HOSTILE = "<script>alert(1)</script>\x1b[2J\x1b[32mACCEPTED\x00\r\nACCEPTED \u202egnp.exe"
RAW = ("\x1b", "\x00", "\r", "\u202e", "\u2028")

# Every line the text view prints starts with one of these: the gate's own labels, never a record's text.
GATE_LINE = re.compile(
    r"run |property |records for a property the card has no row for: |  no trial missed, timed out or faulted$"
    r"|  trial \d+: (MISS|TIMEOUT|FAULT|HIT), record |  not shown: \d+ more |  passing sample: \d+ of \d+ hits"
    r"|    (detail|exit|fault|stdout|stderr|write|writes|worker): "
)


@pytest.fixture(autouse=True)
def _logs_back_to_default() -> object:
    """`gate evidence` (main) routes logs to the captured stderr, which closes after the test: undo it."""
    yield
    structlog.reset_defaults()


def record(
    pid: str,
    index: int,
    kind: OutcomeKind,
    *,
    detail: str = "",
    stdout: bytes = b"",
    stderr: bytes = b"",
    writes: tuple[FileChange, ...] = (),
    **facts: object,
) -> TrialRecord:
    obs = Observation(
        run_id=RUN_ID,
        property_id=pid,
        trial_index=index,
        stdout=Captured(data=stdout, length=len(stdout)),
        stderr=Captured(data=stderr, length=len(stderr)),
        writes=writes,
        **facts,
    )
    outcome = Outcome(trial_index=index, kind=kind, detail=detail)
    return TrialRecord(property_id=pid, trial_index=index, observation=obs, outcome=outcome)


def assert_inert(text: str) -> None:
    """No raw control, escape or bidi character, and no line that is not one of the gate's own."""
    assert all(char.isprintable() or char == "\n" for char in text)
    for line in text.splitlines():
        assert GATE_LINE.match(line), line


def view(card: VerdictCard, records: list[TrialRecord], **kwargs: object) -> Review:
    return build_review(card, by_digest(records), **kwargs)  # type: ignore[arg-type]


@given(
    kinds=st.lists(st.sampled_from(list(OutcomeKind)), max_size=40),
    limit=st.integers(0, 25),
    passes=st.integers(0, 5),
    order=st.randoms(use_true_random=False),
)
def test_selection_shows_problems_to_the_limit_and_samples_passes_stably(
    card: VerdictCard, kinds: list[OutcomeKind], limit: int, passes: int, order: object
) -> None:
    """Misses, timeouts and faults show by trial index up to the limit with the rest counted; the pass
    sample is the hits with the smallest digests, whatever order the records come in."""
    records = [record(STAT, i, kind, detail=f"d{i}") for i, kind in enumerate(kinds)]
    result = view(card, records, limit=limit, passes=passes)
    shuffled = list(by_digest(records).items())
    order.shuffle(shuffled)  # type: ignore[attr-defined]
    assert build_review(card, dict(shuffled), limit=limit, passes=passes) == result
    (prop,) = (p for p in result.properties if p.property_id == STAT)
    problems = [i for i, kind in enumerate(kinds) if kind is not OutcomeKind.HIT]
    assert [t.trial_index for t in prop.problems] == problems[:limit]
    assert prop.more == max(0, len(problems) - limit)
    hits = sorted((record_digest(r), r.trial_index) for r in records if r.outcome.kind is OutcomeKind.HIT)
    assert [t.trial_index for t in prop.passes] == sorted(i for _, i in hits[:passes])
    assert [t.kind for t in prop.passes] == [OutcomeKind.HIT] * len(prop.passes)
    counts = prop.counts
    assert (counts.hit, counts.miss, counts.timeout, counts.fault) == tuple(kinds.count(k) for k in OutcomeKind)
    assert_inert(result.to_text())


def test_rows_follow_the_card_and_only_narrows_them(card: VerdictCard) -> None:
    """Properties appear in card row order with a count line each; `only` keeps just the rows named."""
    records = [record(SAFETY, 0, OutcomeKind.HIT), record(CONTRACT, 0, OutcomeKind.MISS, detail="total 0 != 12.10")]
    records += [record(STAT, i, k) for i, k in enumerate([OutcomeKind.HIT, OutcomeKind.TIMEOUT, OutcomeKind.FAULT])]
    result = view(card, records)
    assert [p.property_id for p in result.properties] == [row.id for row in card.properties]
    stat = result.properties[2]
    assert stat.count_line() == f"{STAT} (statistical, card: pass): trials 3, hits 1, misses 0, timeouts 1, faults 1"
    assert [p.property_id for p in view(card, records, only={STAT, CONTRACT}).properties] == [CONTRACT, STAT]


def test_records_of_a_property_without_a_row_are_named(card: VerdictCard) -> None:
    """A record for a property the card has no row for is listed (escaped), not silently dropped."""
    result = view(card, [record("ghost\x1b[31m", 0, OutcomeKind.HIT)])
    assert result.unbound == ("ghost\x1b[31m",)
    assert "records for a property the card has no row for: ghost\\x1b[31m" in result.to_text()


def test_a_shown_trial_carries_what_its_record_holds(card: VerdictCard) -> None:
    """Exit facts, stream heads cut with their full length and sha256, writes, worker, image, seed, fault and digest."""
    writes = tuple(FileChange(path=f"/work/f{i}", change="created") for i in range(WRITES_SHOWN + 2))
    long = b"x" * (HEAD_CHARS + 50)
    rec = record(
        STAT, 4, OutcomeKind.FAULT, detail="engine gone", stdout=long, writes=writes, exit_code=None, signal=9,
        timed_out=True, oom_killed=True, duration_s=1.5, worker_id="w-7", image_id="sha256:abc", fault="engine gone",
        seed=1234,
    )  # fmt: skip
    (trial,) = next(p for p in view(card, [rec]).properties if p.property_id == STAT).problems
    exit_facts = (trial.exit_code, trial.signal, trial.timed_out, trial.oom_killed, trial.duration_s)
    assert exit_facts == (None, 9, True, True, 1.5)
    assert (trial.worker_id, trial.image_id, trial.fault) == ("w-7", "sha256:abc", "engine gone")
    assert trial.digest == record_digest(rec) and trial.detail == "engine gone"
    assert trial.stdout.text == "x" * HEAD_CHARS and not trial.stdout.complete
    assert (trial.stdout.length, trial.stdout.sha256) == (len(long), rec.observation.stdout.sha256)
    assert trial.stderr.complete and trial.stderr.text == ""
    assert len(trial.writes) == WRITES_SHOWN and trial.writes_total == WRITES_SHOWN + 2
    lines = "\n".join(trial.lines())
    assert "exit: code none, signal 9, timed out yes, oom killed yes, 1.50s" in lines
    assert f"stdout: {len(long)} bytes, sha256 {trial.stdout.sha256}, first {HEAD_CHARS} characters: xxx" in lines
    assert "writes: 2 more not shown" in lines and "fault: engine gone" in lines
    assert "worker: w-7, image sha256:abc, seed 1234" in lines
    assert trial.to_data()["seed"] == 1234  # PROBEGATE_TRIAL_SEED=1234 replays the trial


def test_a_hostile_record_renders_inert_as_text_and_valid_json(card: VerdictCard) -> None:
    """Markup, ANSI sequences, NUL, CR, newlines and bidi marks in detail, streams and paths show as
    escapes after a fixed label: the fake verdict cannot start a line, and the JSON keeps them exactly."""
    rec = record(
        CONTRACT,
        0,
        OutcomeKind.MISS,
        detail=HOSTILE,
        stdout=HOSTILE.encode(),
        stderr=b"\xff\xfe" + HOSTILE.encode(),
        writes=(FileChange(path="/work/" + HOSTILE, change="created"),),
        worker_id=HOSTILE,
        fault=HOSTILE,
    )
    result = view(card, [rec])
    text = result.to_text()
    assert_inert(text)
    assert not any(raw in text for raw in RAW)
    assert not any(line.lstrip().startswith(("ACCEPTED", "<script>")) for line in text.splitlines())
    assert "detail: <script>alert(1)</script>\\x1b[2J\\x1b[32mACCEPTED\\x00\\r\\nACCEPTED \\u202egnp.exe" in text
    assert "\\xff\\xfe<script>" in text  # bytes that are not UTF-8 show as themselves
    dumped = result.to_json()
    assert dumped.isascii()
    (shown,) = json.loads(dumped)["properties"][1]["problems"]
    assert shown["detail"] == HOSTILE and shown["stdout"]["head"] == HOSTILE
    assert shown["writes"] == [{"change": "created", "path": "/work/" + HOSTILE}]


ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=60)  # surrogates, controls, bidi marks included


@given(detail=ANY_TEXT, name=ANY_TEXT, out=st.binary(max_size=80), kind=st.sampled_from(list(OutcomeKind)))
def test_any_record_text_renders_inert_and_any_json_parses(
    card: VerdictCard, detail: str, name: str, out: bytes, kind: OutcomeKind
) -> None:
    """Whatever text or bytes a record holds (lone surrogates too), the text view prints only the gate's
    own lines with every character printable, and the JSON parses back to the same values."""
    rec = record(
        STAT, 0, kind, detail=detail, stdout=out, stderr=out, writes=(FileChange(path=name, change="deleted"),),
        worker_id=name, image_id=name, fault=name or None,
    )  # fmt: skip
    result = view(card, [rec], passes=1)
    assert_inert(result.to_text())
    shown = json.loads(result.to_json())["properties"][2]
    (trial,) = shown["problems"] or shown["passes"]
    assert trial["detail"] == rec.outcome.detail and trial["worker_id"] == name
    assert trial["writes"][0]["path"] == name and trial["stdout"]["length"] == len(out)


def test_negative_counts_are_refused(card: VerdictCard) -> None:
    """A negative limit or sample size is a caller's bug, refused rather than read as "all but N"."""
    with pytest.raises(ValueError, match="0 or more"):
        build_review(card, {}, limit=-1)


# The command, end to end over the mini suite's real run and store.


def evidence_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()  # what the run logged before
    code = main(["evidence", *args])
    out, err = capsys.readouterr()
    return code, out, err


def hostile_tool(spec, fixture):  # type: ignore[no-untyped-def]
    """Every third statistical trial names a hostile tool (a miss quoting it) and writes raw bytes to stderr."""
    if spec.trial_index % 3:
        return good(spec, fixture)
    data = json.dumps({"tool": HOSTILE}).encode()
    err = HOSTILE.encode() + b"\xff"
    return Observation.of(
        spec, exit_code=0, stdout=Captured(data=data, length=len(data)), stderr=Captured(data=err, length=len(err))
    )


@pytest.fixture
def blocked(tmp_path: Path) -> Suite:
    """The mini suite after a run whose contract total is wrong and whose statistical trials 0, 3, 6, 9 are hostile."""
    suite = build_suite(tmp_path)

    def handler(spec, fixture):  # type: ignore[no-untyped-def]
        if spec.property_id == CONTRACT:
            data = b'{"total": "0"}'
            return Observation.of(spec, exit_code=0, stdout=Captured(data=data, length=len(data)), worker_id="w-1")
        return but(STAT, hostile_tool)(spec, fixture)

    run(suite, handler)
    return suite


def test_the_command_shows_the_failing_assertion(blocked: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """`gate evidence CARD` exits 0 and shows the contract miss with the check's assertion message and its record."""
    code, out, err = evidence_cli([str(blocked.card)], capsys)
    assert code == RET_OK and err == ""
    assert_inert(out)
    block = out.split(f"property {CONTRACT} ", 1)[1]
    assert "  trial 0: MISS, record " in block and "    detail: total 0 != 12.10\n" in block
    digest = re.search(r"trial 0: MISS, record ([0-9a-f]{64})", block)
    assert digest and (blocked.card.parent / "evidence" / f"{digest[1]}.json").is_file()
    assert f"property {STAT} (statistical, card: inconclusive_sample): trials 10, hits 6, misses 4" in out
    assert not any(raw in out for raw in RAW)


def test_the_command_prints_json_with_the_flags_applied(blocked: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """--json --property --limit --passes: one JSON document of that row, problems cut and counted, passes sampled."""
    args = [str(blocked.card), "--json", "--property", STAT, "--limit", "1", "--passes", "2"]
    code, out, _ = evidence_cli(args, capsys)
    assert code == RET_OK and out.isascii()
    (prop,) = json.loads(out)["properties"]
    assert prop["id"] == STAT and prop["more"] == 3 and len(prop["passes"]) == 2
    (trial,) = prop["problems"]
    assert trial["trial_index"] == 0 and trial["detail"] == f"chose {HOSTILE}"
    assert trial["stderr"]["head"] == HOSTILE + "\\xff"
    again = evidence_cli(args, capsys)[1]
    assert again == out


def test_the_command_refuses_a_tampered_store(blocked: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """A record edited in place is refused as `gate refold` refuses it: one line naming the file, exit 65."""
    path = next(iter(sorted((blocked.card.parent / "evidence").glob("*.json"))))
    data = path.read_bytes()
    assert b'"exit_code":0' in data
    path.write_bytes(data.replace(b'"exit_code":0', b'"exit_code":1'))
    code, out, err = evidence_cli([str(blocked.card)], capsys)
    assert code == RET_CONFIG and out == ""
    assert err.count("\n") == 1 and path.name in err and "tampered evidence record" in err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--property", "nope\x1b[2J"], "--property: the card has no property nope\\x1b[2J"),
        (["--limit", "-1"], "argument --limit: must be 0 or more"),
        (["--passes", "two"], "argument --passes: not a whole number"),
    ],
)
def test_the_command_refuses_bad_arguments_in_one_line(
    blocked: Suite, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    """An unknown property id or a negative or non-numeric count is one escaped line naming it, exit 64."""
    code, out, err = evidence_cli([str(blocked.card), *args], capsys)
    assert code == RET_USAGE and out == ""
    assert err.count("\n") == 1 and said in err


def test_the_command_documents_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """`gate evidence --help` names the exit codes, as `gate refold --help` does."""
    code, out, _ = evidence_cli(["--help"], capsys)
    assert code == RET_OK and all(f"{n}:" in out for n in ("Exit 0", "64", "65", "66"))
