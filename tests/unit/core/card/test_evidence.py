"""Evidence: every judged trial kept by content beside the card (gate.io.evidence), the card's digest
over them (gate.core.card.evidence) and `gate refold`, which re-folds the records and checks the card; no Docker."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
import structlog
from support.mini_suite import CONTRACT, RUN_ID, STAT, Suite, build_suite, but, good, run, run_request, stdout

from gate.cli.main import main
from gate.core.card.evidence import TrialRecord, evidence_digest, record_bytes, record_digest, refold
from gate.core.errors import UsageError
from gate.core.suite.trial import Captured, FileChange, Observation
from gate.core.verdicts.verdict import Kind, Outcome, OutcomeKind
from gate.io.artifacts import read_card, write_card
from gate.run.executors.mock import MockExecutor


@pytest.fixture(autouse=True)
def _logs_back_to_default() -> object:
    """`gate refold` (main) routes logs to the captured stderr, which closes after the test: undo it."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    """The three-property mini suite (1 safety, 1 contract and 10 statistical trials) after one clean run."""
    built = build_suite(tmp_path)
    run(built, good)
    return built


def store(suite: Suite) -> Path:
    return suite.card.parent / "evidence"


def records(suite: Suite) -> list[Path]:
    return sorted(store(suite).glob("*.json"))


def refold_cli(card: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    capsys.readouterr()  # what the run logged before
    code = main(["refold", str(card)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def record_of(path: Path) -> TrialRecord:
    return TrialRecord.model_validate_json(path.read_bytes())


def test_a_run_keeps_one_record_per_trial_and_the_card_binds_their_digest(suite: Suite) -> None:
    """A run of 12 trials writes 12 records, each named by its bytes' sha256, whose digest is the card's `evidence`."""
    card = read_card(suite.card)
    files = records(suite)
    assert len(files) == sum(row.trials for row in card.properties) == 12
    for path in files:
        assert path.name == hashlib.sha256(path.read_bytes()).hexdigest() + ".json"
        record = record_of(path)
        assert record.observation.run_id == RUN_ID
        assert record_bytes(record) == path.read_bytes()
    assert card.evidence == evidence_digest(p.stem for p in files)
    keys = {(record_of(p).property_id, record_of(p).trial_index) for p in files}
    assert keys == {(row.id, i) for row in card.properties for i in range(row.trials)}


def test_a_record_keeps_the_observation_and_the_judged_outcome(suite: Suite) -> None:
    """The contract trial's record holds its stdout head with length and sha256, exit code, image and the hit."""
    contract = next(r for r in map(record_of, records(suite)) if r.property_id == CONTRACT)
    assert contract.observation.exit_code == 0 and contract.observation.image_id == "sha256:mock"
    assert contract.observation.stdout.data == b'{"total": "12.10"}'
    assert contract.observation.stdout.length == len(contract.observation.stdout.data)
    assert contract.outcome.kind is OutcomeKind.HIT


def test_refold_agrees_with_an_untouched_card(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """`gate refold` on the card as written prints one agreeing line per property and exits 0."""
    code, lines, _ = refold_cli(suite.card, capsys)
    assert code == 0
    assert len(lines) == 3 and all(": agrees (pass, " in line for line in lines)
    assert lines[2] == f"{STAT}: agrees (pass, 10/10 hits)"


def test_a_record_edited_in_place_is_refused_by_name(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """A record whose outcome was flipped in place no longer hashes to its name: exit 65 naming that file."""
    path = next(p for p in records(suite) if record_of(p).property_id == CONTRACT)
    path.write_bytes(path.read_bytes().replace(b'"kind":"hit"', b'"kind":"miss"'))
    code, lines, err = refold_cli(suite.card, capsys)
    assert code == 65 and lines == []
    assert err.count("\n") == 1 and path.name in err and "tampered evidence record" in err


def test_a_deleted_record_is_refused(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """A record removed from the store makes the set's digest differ from the card's: exit 65 naming the trial."""
    path = next(p for p in records(suite) if record_of(p).property_id == STAT and record_of(p).trial_index == 3)
    path.unlink()
    code, _, err = refold_cli(suite.card, capsys)
    assert code == 65
    assert err.count("\n") == 1 and f"no record of {STAT} trial 3" in err and "evidence" in err


def test_an_added_record_is_refused_by_name(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """A validly named record of an extra trial of the card's run (a forged 11th hit) is refused: exit 65 naming it."""
    base = next(record_of(p) for p in records(suite) if record_of(p).property_id == STAT)
    forged = base.model_copy(
        update={
            "trial_index": 10,
            "observation": base.observation.model_copy(update={"trial_index": 10}),
            "outcome": base.outcome.model_copy(update={"trial_index": 10}),
        }
    )
    name = record_digest(forged) + ".json"
    (store(suite) / name).write_bytes(record_bytes(forged))
    code, _, err = refold_cli(suite.card, capsys)
    assert code == 65 and err.count("\n") == 1 and name in err and "not one the card binds" in err


def test_a_record_of_another_run_in_the_shared_store_is_not_bound(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    """A well-formed record of another run (cards written to one folder share the store) is not the card's."""
    base = record_of(records(suite)[0])
    other = base.model_copy(update={"observation": base.observation.model_copy(update={"run_id": "another-run"})})
    (store(suite) / (record_digest(other) + ".json")).write_bytes(record_bytes(other))
    code, _, _ = refold_cli(suite.card, capsys)
    assert code == 0


def test_a_file_that_is_not_a_record_is_refused(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """A file in the store whose name is not `<sha256>.json` is refused by name (exit 65), not skipped."""
    (store(suite) / "extra.json").write_text("{}")
    code, _, err = refold_cli(suite.card, capsys)
    assert code == 65 and "extra.json" in err and "not an evidence record" in err


def test_edited_hits_on_a_card_row_differ(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """A card whose statistical row claims 9 of 10 hits while the records fold to 10 exits 1 naming that property."""
    card = read_card(suite.card)
    rows = tuple(row.model_copy(update={"hits": 9}) if row.id == STAT else row for row in card.properties)
    write_card(suite.card, card.model_copy(update={"properties": rows}))
    code, lines, _ = refold_cli(suite.card, capsys)
    assert code == 1
    assert [line for line in lines if "DIFFERS" in line] == [
        f"{STAT}: DIFFERS: card says pass 9/10 hits, the records fold to pass 10/10 hits"
    ]


def test_a_card_whose_kind_was_upgraded_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A blocked run's card edited to say the contract row passed is caught: the records still fold to fail_contract."""
    suite = build_suite(tmp_path)
    run(suite, but(CONTRACT, lambda spec, _: Observation.of(spec, exit_code=0, stdout=stdout({"total": "0"}))))
    card = read_card(suite.card)
    rows = tuple(row.model_copy(update={"kind": Kind.PASS}) if row.id == CONTRACT else row for row in card.properties)
    write_card(suite.card, card.model_copy(update={"properties": rows}))
    code, lines, _ = refold_cli(suite.card, capsys)
    assert (
        code == 1
        and f"{CONTRACT}: DIFFERS: card says pass 0/1 hits, the records fold to fail_contract 0/1 hits" in lines
    )


def test_a_changed_evidence_digest_on_the_card_is_refused(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """A card whose `evidence` digest was replaced no longer matches its records: exit 65 naming the store."""
    card = read_card(suite.card)
    write_card(suite.card, card.model_copy(update={"evidence": "0" * 64}))
    code, _, err = refold_cli(suite.card, capsys)
    assert code == 65 and err.count("\n") == 1 and str(store(suite)) in err


def test_a_card_without_evidence_still_reads_and_refold_refuses_it(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    """A card written before evidence was kept (no `evidence` key) reads as before, and refold refuses it with 65."""
    data = json.loads(suite.card.read_text())
    del data["evidence"]
    suite.card.write_text(json.dumps(data))
    assert read_card(suite.card).evidence is None
    code, _, err = refold_cli(suite.card, capsys)
    assert code == 65 and "binds no evidence" in err


def test_a_drifted_run_binds_the_empty_evidence_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run with no trial (fixture drift) binds the digest of no records; refold agrees with its harness_error rows."""
    built = build_suite(tmp_path)
    (built.fixtures / "tools" / "refund-query.json").write_text("{}")
    result, _ = run(built, good)
    assert result.card.evidence == hashlib.sha256(b"").hexdigest() == evidence_digest([])
    code, lines, _ = refold_cli(built.card, capsys)
    assert code == 0 and len(lines) == 3
    assert all(line.endswith(": agrees (harness_error, 0/0 hits)") for line in lines), lines


def test_an_evidence_store_that_is_a_file_is_refused_before_any_trial(tmp_path: Path) -> None:
    """A file where the evidence folder belongs is refused before the executor opens."""
    built = build_suite(tmp_path)
    built.card.parent.mkdir(parents=True)
    (built.card.parent / "evidence").write_text("")
    executor = MockExecutor(good)
    with pytest.raises(UsageError, match="evidence store is not a directory"):
        run_request(built.request, executor)
    assert executor.calls == []


def test_evidence_digest_is_order_free_and_collapses_duplicates() -> None:
    """The digest over digests is sha256 of the sorted distinct digests, one per line, whatever the input order."""
    a, b = "a" * 64, "b" * 64
    assert evidence_digest([b, a, b]) == hashlib.sha256(f"{a}\n{b}\n".encode()).hexdigest() == evidence_digest([a, b])


def test_a_record_naming_two_trials_is_refused() -> None:
    """A record whose observation, outcome and key name different trials does not validate."""
    obs = Observation(run_id="r", property_id="p", trial_index=1)
    with pytest.raises(ValueError, match="different trials"):
        TrialRecord(
            property_id="p", trial_index=2, observation=obs, outcome=Outcome(trial_index=2, kind=OutcomeKind.HIT)
        )


def test_record_bytes_escape_what_the_patch_wrote() -> None:
    """Raw bytes and a file name with control and bidi characters round-trip through the ASCII canonical form."""
    obs = Observation(
        run_id="r",
        property_id="p",
        trial_index=0,
        stdout=Captured(data=b"\xff\x00", length=2),
        writes=(FileChange(path="/work/\x1b[2J\u202e\\xff", change="created"),),
    )
    record = TrialRecord(property_id="p", trial_index=0, observation=obs, outcome=Outcome(trial_index=0, kind="miss"))
    data = record_bytes(record)
    assert data.isascii()
    assert TrialRecord.model_validate_json(data) == record


def test_duplicate_trial_records_differ_even_when_bound(suite: Suite) -> None:
    """Two records of one trial (bound only by a forged card) make the row differ rather than count twice."""
    card = read_card(suite.card)
    recs = [record_of(p) for p in records(suite)]
    twice = next(r for r in recs if r.property_id == STAT)
    result = refold(
        card, [*recs, twice.model_copy(update={"outcome": twice.outcome.model_copy(update={"detail": "x"})})]
    )
    assert not result.agrees
    assert any(line.startswith(f"{STAT}: DIFFERS: trial(s) [") for line in result.lines())


@pytest.mark.parametrize(("outputs", "refused"), [('["out/card.json"]', True), ('["out/*"]', False)])
def test_an_evidence_store_inside_the_patched_tree_must_be_an_output(
    tmp_path: Path, outputs: str, refused: bool
) -> None:
    """A --card in the tree whose evidence folder `[suite] outputs` does not leave out is refused before any trial."""
    built = build_suite(tmp_path)
    toml = built.request.suite
    toml.write_text(toml.read_text().replace("[suite]\n", f"[suite]\noutputs = {outputs}\n", 1))
    card = built.request.workdir / "out" / "card.json"
    request = replace(built.request, card=card, ledger=tmp_path / "ledger.json")
    executor = MockExecutor(good)
    if refused:
        with pytest.raises(UsageError, match=r"lies inside the patched tree \(out/evidence\)"):
            run_request(request, executor)
        assert executor.calls == [] and not (card.parent / "evidence").exists()
    else:
        result = run_request(request, executor)
        assert len(list((card.parent / "evidence").glob("*.json"))) == 12 and result.card.evidence
