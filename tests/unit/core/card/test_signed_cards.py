"""Signed cards: `gate run --sign-key` writes the envelope beside the card, the envelope proves exactly
that card file, tree, base and evidence, and every edit or substitution a forger could make is refused
with its reason. Cards come from a real `run_gate` over a MockExecutor."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.mini_suite import Suite, build_suite, good, run

from gate.cli.main import main
from gate.core.card.card import VerdictCard
from gate.core.card.dsse import INTOTO_PAYLOAD_TYPE, ResourceDescriptor, Statement, sign
from gate.core.card.signedcard import PREDICATE_TYPE, card_statement, sign_card, signature_problem
from gate.core.errors import RET_BLOCKED, RET_OK, RET_USAGE, UsageError
from gate.io.artifacts import card_bytes
from gate.io.cardsig import envelope_path, signature_reason
from gate.io.keys import SigningKey, public_path, write_new_key

BASE = "c0ffee" * 6 + "abcd"


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Suite, SigningKey, VerdictCard, bytes]:
    """A mini suite run with --sign-key (a key outside the tree): the suite, the key, the card and its file's bytes."""
    suite = build_suite(tmp_path)
    key = write_new_key(tmp_path / "keys" / "gate.key")
    suite = Suite(
        replace(suite.request, sign_key=tmp_path / "keys" / "gate.key"), suite.fixtures, suite.card, suite.ledger
    )
    result, _ = run(suite, good)
    return suite, key, result.card, suite.card.read_bytes()


def problem(card: VerdictCard, data: bytes, envelope, key: SigningKey, **where) -> str | None:
    args = {"tree_digest": card.tree_digest, "base_commit": card.base_rev} | where
    return signature_problem(envelope, card, data, key.public(), **args)


def test_run_with_a_sign_key_writes_an_envelope_that_proves_the_card(signed) -> None:
    """The envelope beside the card is an in-toto Statement over the card file, tree and evidence, signed
    by the key, and it verifies; the card file is exactly what write_card wrote."""
    suite, key, card, data = signed
    assert data == card_bytes(card)
    where = envelope_path(suite.card)
    assert where.name == "card.json.dsse.json"
    envelope = json.loads(where.read_text())
    assert envelope["payloadType"] == INTOTO_PAYLOAD_TYPE
    assert envelope["signatures"][0]["keyid"] == key.key_id
    assert (
        signature_reason(suite.card, card, data, key.public(), tree_digest=card.tree_digest, base_commit=None) is None
    )
    statement = card_statement(card, data)
    assert statement.predicate_type == PREDICATE_TYPE and statement.predicate["evidence"] == card.evidence
    assert [s.name for s in statement.subject] == ["tree", "card"]  # no base: the run had no --base


def test_base_commit_is_a_subject_when_the_card_has_one(signed) -> None:
    """A card from a run with --base names its base commit as a gitCommit subject, checked against accept's base."""
    _, key, card, _ = signed
    card = card.model_copy(update={"base_rev": BASE})
    data = card_bytes(card)
    envelope = sign_card(card, data, key)
    assert card_statement(card, data).digest("base", "gitCommit") == BASE
    assert problem(card, data, envelope, key) is None
    assert "for base c0ffee" in problem(card, data, envelope, key, base_commit="f" * 40)
    assert "for base none" in problem(card, data, sign_card(card.model_copy(update={"base_rev": None}), data, key), key)


def edit(card: VerdictCard, **fields) -> tuple[VerdictCard, bytes]:
    """A forger's consistent edit: the card changed and written again exactly as the gate writes cards."""
    changed = VerdictCard.model_validate({**card.model_dump(), **fields})
    return changed, card_bytes(changed)


def test_every_edit_and_substitution_is_refused(signed, tmp_path: Path) -> None:
    """An edited field, an edited evidence digest, a byte of whitespace, another key's signature, a wrong
    payload type, a statement for another tree, a swapped predicate type, duplicate subjects and another
    run's envelope: each is refused, with its own reason."""
    _, key, card, data = signed
    envelope = sign_card(card, data, key)
    other = write_new_key(tmp_path / "other.key")
    body = card_statement(card, data)

    def resigned(statement: Statement, payload_type: str = INTOTO_PAYLOAD_TYPE):
        return sign(payload_type, statement.to_bytes(), key)

    status_flip, status_bytes = edit(card, exit_code=0 if card.exit_code else 1)
    evidence_flip, evidence_bytes = edit(card, evidence="0" * 64)
    other_run, other_bytes = edit(card, run_id="another-run")
    cases = {
        "edited field": (status_flip, status_bytes, envelope, "bytes changed after signing"),
        "evidence": (evidence_flip, evidence_bytes, envelope, "evidence digest 0000000000000000 is not the signed"),
        "whitespace": (card, data + b"\n", envelope, "bytes changed after signing"),
        "other key": (card, data, sign_card(card, data, other), f"not signed by the trusted key {key.key_id[:16]}"),
        "payload type": (card, data, resigned(body, "application/json"), "payloadType 'application/json'"),
        "tree": (
            card,
            data,
            resigned(
                body.model_copy(
                    update={
                        "subject": (
                            ResourceDescriptor(name="tree", digest={"probegateTree": "e" * 64}),
                            *body.subject[1:],
                        ),
                    }
                )
            ),
            "for tree eeeeeeeeeeeeeeee",
        ),
        "predicate type": (card, data, resigned(body.model_copy(update={"predicate_type": "urn:x"})), "predicateType"),
        "duplicate subjects": (
            card,
            data,
            resigned(body.model_copy(update={"subject": body.subject * 2})),
            "for tree none",
        ),
        "another run's envelope": (card, data, sign_card(other_run, other_bytes, key), "bytes changed after signing"),
        "predicate not the card": (
            card,
            data,
            resigned(body.model_copy(update={"predicate": {**body.predicate, "status": "x"}})),
            "predicate is not the card",
        ),
    }
    assert problem(card, data, envelope, key) is None
    for name, (shown, shown_bytes, env, needle) in cases.items():
        why = problem(shown, shown_bytes, env, key)
        assert why is not None and needle in why, (name, why)
    assert "for tree" in problem(card, data, envelope, key, tree_digest="d" * 64)


def test_unsigned_and_garbled_envelopes_are_refused_by_name(signed) -> None:
    """No envelope beside the card, or one that is not a DSSE envelope, is a reason naming the file."""
    suite, key, card, data = signed
    where = envelope_path(suite.card)
    where.write_text("{not json")
    assert "unreadable card signature" in signature_reason(
        suite.card, card, data, key.public(), tree_digest=card.tree_digest, base_commit=None
    )
    where.unlink()
    assert "the card is unsigned" in signature_reason(
        suite.card, card, data, key.public(), tree_digest=card.tree_digest, base_commit=None
    )


def test_a_sign_key_inside_the_patched_tree_is_refused_before_any_trial(tmp_path: Path) -> None:
    """A private key the patched tree holds would be copied into every sandbox: the run refuses it, naming
    the flag, and no trial runs."""
    suite = build_suite(tmp_path)
    write_new_key(suite.request.workdir / "gate.key")
    suite = Suite(
        replace(suite.request, sign_key=suite.request.workdir / "gate.key"), suite.fixtures, suite.card, suite.ledger
    )
    with pytest.raises(UsageError, match="lies in the patched tree") as caught:
        run(suite, good)
    assert caught.value.field == "--sign-key"
    assert not suite.card.exists()


def test_keys_sign_and_refold_commands(signed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gate keys new` writes a pair and refuses to overwrite either half; `gate sign` re-signs a card with
    the new key; `gate refold --key` verifies it, and refuses it under the old key or once edited."""
    suite, _, card, _ = signed
    new = tmp_path / "rotated.key"
    assert main(["keys", "new", str(new)]) == RET_OK
    assert json.loads(capsys.readouterr().out)["public"] == str(public_path(new))
    assert main(["keys", "new", str(new)]) == RET_USAGE
    public_path(tmp_path / "lonely.key").write_text("x")
    assert main(["keys", "new", str(tmp_path / "lonely.key")]) == RET_USAGE
    assert not (tmp_path / "lonely.key").exists()
    capsys.readouterr()

    assert main(["sign", str(suite.card), "--key", str(new)]) == RET_OK
    assert main(["refold", str(suite.card), "--key", str(public_path(new))]) == RET_OK
    assert "signature: verified by key" in capsys.readouterr().out
    assert main(["refold", str(suite.card), "--key", str(public_path(tmp_path / "keys" / "gate.key"))]) == RET_BLOCKED
    assert "not signed by the trusted key" in capsys.readouterr().out
    suite.card.write_bytes(edit(card, reasons=("forged",))[1])
    assert main(["refold", str(suite.card), "--key", str(public_path(new))]) == RET_BLOCKED
    assert "bytes changed after signing" in capsys.readouterr().out


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_changed_byte_of_the_card_is_refused(signed, data: st.DataObject) -> None:
    """Whichever byte of the card file changes, and to whatever, the signature no longer proves it."""
    _, key, card, raw = signed
    envelope = sign_card(card, raw, key)
    index = data.draw(st.integers(0, len(raw) - 1))
    flip = data.draw(st.integers(1, 255))
    changed = raw[:index] + bytes([raw[index] ^ flip]) + raw[index + 1 :]
    assert (
        problem(card, changed, envelope, key) == "the card file is not the signed card: its bytes changed after signing"
    )


def test_an_unsigned_run_removes_an_earlier_runs_envelope(signed) -> None:
    """A run without a key over a card that an earlier run signed leaves no stale envelope beside the new card."""
    suite, _, _, _ = signed
    assert envelope_path(suite.card).exists()
    run(Suite(replace(suite.request, sign_key=None, new_ledger=False), suite.fixtures, suite.card, suite.ledger), good)
    assert not envelope_path(suite.card).exists()
