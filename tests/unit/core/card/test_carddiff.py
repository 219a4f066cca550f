"""gate.core.card.carddiff and `gate diff`: what changed between two verdict cards, escaped text or JSON,
exit 0 when nothing did and 1 when something did."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from gate.cli.main import main
from gate.core.card.carddiff import CardDiff, diff_cards
from gate.core.errors import RET_BLOCKED, RET_CONFIG, RET_NOINPUT, RET_OK
from gate.core.policy.policy import JobStatus
from gate.core.verdicts.bands import wilson
from gate.core.verdicts.verdict import Band, Kind
from gate.io.artifacts import write_card
from unit.core.card.test_card import NOW, card, clean_rows, row

HOSTILE = "boom\x1b[31m red\rover\nsecond\x00nul\u2028\u202eevil"
ESCAPED = r"boom\x1b[31m red\rover\nsecond\x00nul\u2028\u202eevil"


def with_rows(*rows):
    return card(properties=tuple(rows))


def changed(diff: CardDiff, pid: str) -> dict[str, tuple[object, object]]:
    """The changed fields of one property, by name."""
    (prop,) = [p for p in diff.properties if p.id == pid]
    return {c.field: (c.a, c.b) for c in prop.changes}


def test_identical_cards_have_no_differences():
    """Two equal cards give an empty diff, "no differences" as text, and count as the same."""
    diff = diff_cards(card(), card())
    assert diff.same and diff == CardDiff()
    assert diff.to_text() == "no differences\n"


def test_run_id_and_creation_time_are_not_compared():
    """Fields that differ on every run (run id, creation time, workdir) are not listed."""
    other = card(run_id="run-2", created_at=NOW + timedelta(hours=1), workdir="/elsewhere")
    assert diff_cards(card(), other).same


def test_a_kind_change_is_named():
    """A row whose kind changed is listed under its property with both kinds."""
    rows = list(clean_rows())
    rows[1] = row("shape", Band.CONTRACT, kind=Kind.FAIL_CONTRACT, hits=0)
    diff = diff_cards(card(), card(properties=tuple(rows)))
    assert changed(diff, "shape")["kind"] == ("pass", "fail_contract")
    assert "property shape:\n  kind: pass -> fail_contract\n" in diff.to_text()


def test_a_hit_rate_change_names_hits_rate_and_interval():
    """Fewer hits in the same trials show as hits, hit rate and interval changes."""
    rows = list(clean_rows())
    rows[2] = rows[2].model_copy(update={"hits": 7, "interval": wilson(7, 10)})
    fields = changed(diff_cards(card(), card(properties=tuple(rows))), "rate")
    assert fields["hits"] == (9, 7)
    assert fields["hit_rate"] == (0.9, 0.7)
    assert fields["interval"][0]["low"] == pytest.approx(wilson(9, 10).low)
    assert "trials" not in fields and "kind" not in fields


def test_the_same_rate_in_more_trials_is_not_a_rate_change():
    """18 of 20 against 9 of 10 changes trials and hits but not the hit rate."""
    rows = list(clean_rows())
    rows[2] = rows[2].model_copy(update={"trials": 20, "hits": 18})
    fields = changed(diff_cards(card(), card(properties=tuple(rows))), "rate")
    assert set(fields) == {"trials", "hits"}


def test_durations_compare_by_median_and_max():
    """Durations are compared by their median and maximum, only where a row has them."""
    a = with_rows(row("shape", durations_s=(0.1, 0.2, 0.3)))
    b = with_rows(row("shape", durations_s=(0.1, 0.2, 0.9)))
    assert changed(diff_cards(a, b), "shape") == {"duration_max_s": (0.3, 0.9)}
    assert changed(diff_cards(a, with_rows(row("shape"))), "shape") == {
        "duration_median_s": (0.2, None),
        "duration_max_s": (0.3, None),
    }


def test_durations_alone_show_but_do_not_make_the_cards_differ():
    """Two runs of the same tree always time differently: durations are listed, yet the diff is `same`
    (gate diff exits 0) and says only durations differ; any other field change still differs."""
    a = with_rows(row("shape", durations_s=(0.1, 0.2, 0.3)))
    result = diff_cards(a, with_rows(row("shape", durations_s=(0.4, 0.5, 0.9))))
    assert result.same and result.properties
    assert result.to_text().splitlines()[-1] == "only durations differ"
    assert "duration_max_s: 0.3 -> 0.9" in result.to_text()
    other = diff_cards(a, with_rows(row("shape", durations_s=(0.4, 0.5, 0.9), hits=0)))
    assert not other.same and "only durations differ" not in other.to_text()


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"tree_digest": "u" * 64}, "tree_digest"),
        ({"image_id": "sha256:" + "2" * 64}, "image_id"),
        ({"suite_sha256": "f" * 64}, "suite_sha256"),
        ({"base_rev": "abc123"}, "base_rev"),
        ({"new_oracle_edits": ("checks.py",)}, "new_oracle_edits"),
        ({"status": JobStatus.BLOCKED, "exit_code": 1}, "status"),
        ({"status": JobStatus.BLOCKED, "exit_code": 1}, "exit_code"),
    ],
)
def test_a_card_level_change_is_named(update, field):
    """Each compared card-level field that differs is listed by name at the top of the text."""
    diff = diff_cards(card(), card(**update))
    assert field in {c.field for c in diff.card}
    assert any(line.startswith(f"{field}: ") for line in diff.to_text().splitlines())


def test_a_seal_change_is_named():
    """A card bound to another fixture seal lists fixture.seal with both digests in full."""
    base = card()
    other = card(fixture=base.fixture.model_copy(update={"seal": "9" * 64}))
    diff = diff_cards(base, other)
    assert [(c.field, c.a, c.b) for c in diff.card] == [("fixture.seal", "c" * 64, "9" * 64)]


def test_freeze_set_changes_are_listed_per_freeze():
    """A freeze added, removed or changed is one line naming the property it freezes."""
    a = card(freeze_set={"rate": "FRZ-1", "old": "FRZ-2"})
    b = card(freeze_set={"rate": "FRZ-3", "new": "FRZ-4"})
    fields = {c.field: (c.a, c.b) for c in diff_cards(a, b).card}
    assert fields == {
        "freeze_set.new": (None, "FRZ-4"),
        "freeze_set.old": ("FRZ-2", None),
        "freeze_set.rate": ("FRZ-1", "FRZ-3"),
    }


def test_added_and_removed_properties_are_named():
    """A property only card B has is added, one only card A has is removed; neither is a row change."""
    a = with_rows(row("shape"), row("gone"))
    b = with_rows(row("shape"), row("fresh"))
    diff = diff_cards(a, b)
    assert (diff.added, diff.removed, diff.properties) == (("fresh",), ("gone",), ())
    assert diff.to_text() == "added property: fresh\nremoved property: gone\n"


def test_a_repeated_id_cannot_hide_a_row():
    """A second row with the same id in one card only is listed as added, not silently matched."""
    diff = diff_cards(with_rows(row("shape")), with_rows(row("shape"), row("shape", kind=Kind.FAIL_CONTRACT)))
    assert diff.added == ("shape",) and not diff.properties


def test_a_hostile_detail_stays_on_one_escaped_line():
    """ESC, CR, LF, NUL, U+2028 and a bidi mark in a detail are escaped: one line, no control characters."""
    diff = diff_cards(with_rows(row("shape")), with_rows(row("shape", detail=HOSTILE)))
    text = diff.to_text()
    assert text.splitlines() == ["property shape:", f'  detail: "" -> {ESCAPED}']
    assert all(ch.isprintable() for ch in text.replace("\n", ""))


def test_a_hostile_property_id_and_freeze_key_are_escaped():
    """Property ids and freeze keys come from the card too, and are escaped like details."""
    diff = diff_cards(card(freeze_set={HOSTILE: "F"}), with_rows(row(HOSTILE)))
    assert diff.to_text().splitlines() == [
        f"freeze_set.{ESCAPED}: F -> (none)",
        f"added property: {ESCAPED}",
        "removed property: safe",
        "removed property: shape",
        "removed property: rate",
    ]


def test_json_parses_round_trips_and_is_ascii():
    """The JSON form parses, validates back into the same CardDiff, and escapes every non-ASCII character."""
    a = card(freeze_set={"rate": "FRZ-1"})
    rows = list(clean_rows())
    rows[2] = rows[2].model_copy(update={"hits": 7, "interval": wilson(7, 10), "detail": HOSTILE})
    diff = diff_cards(a, card(properties=(*rows[1:], row("fresh")), image_id="sha256:x"))
    text = diff.to_json()
    assert text.isascii() and text.count("\n") == 1
    assert CardDiff.model_validate(json.loads(text)) == diff
    assert CardDiff.model_validate_json(text) == diff
    assert json.loads(CardDiff().to_json()) == {"card": [], "properties": [], "added": [], "removed": []}


def _write(path: Path, c) -> Path:
    write_card(path, c)
    return path


def test_cli_same_cards_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`gate diff` of two equal cards prints "no differences" and exits 0."""
    a, b = _write(tmp_path / "a.json", card()), _write(tmp_path / "b.json", card(run_id="run-2"))
    assert main(["diff", str(a), str(b)]) == RET_OK
    assert capsys.readouterr().out == "no differences\n"


def test_cli_different_cards_exit_1_in_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`gate diff` exits 1 when the cards differ, printing text by default and JSON with --json."""
    a = _write(tmp_path / "a.json", card())
    b = _write(tmp_path / "b.json", card(tree_digest="u" * 64, properties=(row("shape", detail=HOSTILE),)))
    assert main(["diff", str(a), str(b)]) == RET_BLOCKED
    out = capsys.readouterr().out
    assert f"tree_digest: {'t' * 64} -> {'u' * 64}\n" in out and f'  detail: "" -> {ESCAPED}\n' in out
    assert main(["diff", "--json", str(a), str(b)]) == RET_BLOCKED
    parsed = CardDiff.model_validate_json(capsys.readouterr().out)
    assert parsed == diff_cards(card(), card(tree_digest="u" * 64, properties=(row("shape", detail=HOSTILE),)))


def test_cli_missing_card_is_one_line_exit_66(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A missing card is one error line naming the file, exit 66, nothing on stdout."""
    a = _write(tmp_path / "a.json", card())
    assert main(["diff", str(a), str(tmp_path / "nope.json")]) == RET_NOINPUT
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "nope.json" in err and "verdict card not found" in err


def test_cli_json_that_is_not_a_card_is_one_line_exit_65(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A JSON file that is not a verdict card is one error line naming the file, exit 65."""
    a = _write(tmp_path / "a.json", card())
    other = tmp_path / "other.json"
    other.write_text('{"hello": "world"}\n')
    assert main(["diff", str(other), str(a)]) == RET_CONFIG
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "other.json" in err and "unreadable verdict card" in err


def test_cli_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]):
    """`gate diff --help` names what is compared and what exits 0, 1, 65 and 66 mean."""
    assert main(["diff", "--help"]) == RET_OK
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit 0: no differences but durations (shown; they change on every run); 1: the cards differ" in out
    assert "65" in out and "66" in out
